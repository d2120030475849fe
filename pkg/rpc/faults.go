package rpc

import (
	"context"
	"encoding/json"
	"time"
)

// Faults on purpose (the plane's package faults): a trial may carry a
// schedule of rules that make chosen sends go wrong, set by trial.open's
// Faults or replaced by MethodTrialFaults.
const (
	// MethodTrialFaults replaces an open trial's schedule (an empty list
	// clears it); its sends are counted again from 1.
	MethodTrialFaults = "trial.faults"
	// CodeInvalidFaults refuses a schedule that is not valid, whole; the
	// message names the index of the first bad rule.
	CodeInvalidFaults = "invalid_faults"
)

// TrialFaultsRequest names a trial by any of its namespaces and gives its
// new schedule: a JSON list of rules (package faults documents them).
type TrialFaultsRequest struct {
	Namespace string          `json:"namespace"`
	Faults    json.RawMessage `json:"faults"`
}

// Fault is what the plane decided for a send a rule matched: the writer
// refuses it (Status over HTTP, with RetryAfter seconds when set;
// SMTPCode over SMTP), or holds it for Seconds and closes the connection
// (timeout); for delay, duplicate and drop it answers as for any accepted
// send, and VisibleAt says when a delayed message shows.
type Fault struct {
	Rule       int        `json:"rule"`
	Do         string     `json:"do"`
	Status     int        `json:"status,omitempty"`
	RetryAfter int        `json:"retry_after,omitempty"`
	SMTPCode   int        `json:"smtp_code,omitempty"`
	Seconds    int        `json:"seconds,omitempty"`
	Copies     int        `json:"copies,omitempty"`
	VisibleAt  *time.Time `json:"visible_at,omitempty"`
}

// TrialFaults replaces the fault schedule of the trial that owns
// namespace.
func (c *Client) TrialFaults(ctx context.Context, namespace string, faults json.RawMessage) error {
	return c.Call(ctx, MethodTrialFaults, &TrialFaultsRequest{Namespace: namespace, Faults: faults}, &Empty{})
}
