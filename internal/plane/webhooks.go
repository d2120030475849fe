package plane

import (
	"context"
	"errors"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/internal/webhooks"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Provider webhooks (package webhooks, docs/webhooks.md): a trial's
// endpoints are part of its policy in the ledger, set only by the admin.

// parseWebhooks reads a trial's webhooks from an admin call: "" for none,
// or a CodeInvalidWebhooks refusal naming the bad entry (never its URL).
func parseWebhooks(in []rpc.Webhook) (string, error) {
	stored, err := webhooks.Parse(in)
	if err != nil {
		return "", rpc.Errorf(rpc.CodeInvalidWebhooks, "%v", err)
	}
	return stored, nil
}

// SetWebhooks replaces the webhooks of the open trial a namespace belongs
// to; an empty list clears them.
func (b *Broker) SetWebhooks(ctx context.Context, req *rpc.TrialWebhooksRequest) (rpc.Empty, error) {
	if !ident.ValidNamespace(req.Namespace) {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	if req.Webhooks == nil {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeInvalidWebhooks, "webhooks: give a list ([] clears them)")
	}
	stored, err := parseWebhooks(req.Webhooks)
	if err != nil {
		return rpc.Empty{}, err
	}
	t, _, err := b.trialOf(ctx, req.Namespace)
	if err != nil {
		return rpc.Empty{}, err
	}
	err = b.ledger.SetWebhooks(ctx, t.ID, t.Namespace, stored)
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeNotFound, "the trial of %s is closed", req.Namespace)
	}
	if err != nil {
		return rpc.Empty{}, b.storeErr("webhooks", err)
	}
	b.lifecycleDone(t.Namespace)
	b.log.Info().Str("namespace", t.Namespace).Int("webhooks", len(req.Webhooks)).Msg("trial webhooks set")
	return rpc.Empty{}, nil
}

// webhookKeys is trial material made again from the digest of the token
// its bundle's providers hand out (writeDigest).
func (b *Broker) webhookKeys(tr ledger.Trial) webhooks.Keys {
	return webhooks.Derive(b.sesKey, writeDigest(tr))
}

// withWebhookKeys adds trial id's webhook material to its candidate
// environment.
func (b *Broker) withWebhookKeys(env map[string]string, id rpc.Identity) map[string]string {
	p := b.providers("", id)
	return wbenv.WithWebhookKeys(env, p.Resend.WebhookSecret, p.SendGrid.WebhookPublicKey, p.Mailgun.WebhookSigningKey)
}
