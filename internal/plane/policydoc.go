package plane

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// The table as it is printed (`mail-plane policy`, docs/rpc.md) and pinned
// (testdata/policy.json, which the isolation matrix takes its expectations
// from).

// PolicyTable is the plane's policy as exported.
type PolicyTable struct {
	Methods     []Row        `json:"methods"`
	Credentials []Credential `json:"credentials"`
	Views       []View       `json:"views"`
	Profiles    []Profile    `json:"profiles"`
}

// Profile is a kind of trial: APIToken is the secret its mail API (and
// the provider APIs, and its SES secret) is keyed by.
type Profile struct {
	Name     string `json:"name"`
	APIToken string `json:"api_token"`
}

// Row is one method.
type Row struct {
	Method string `json:"method"`
	// Principals maps each principal that may call the method ("writer",
	// "shared writer", "inbox", "shared inbox", "gateway", "admin",
	// "console") to what its call is bound to: "nothing", "trial" (the
	// grant's), "credential" (the trial the presented credential, port or
	// door opens), "capability" (the namespace the call names, opened by
	// its read capability), "plane" or "operator" (the plane, for the
	// operator whose admin grant a console's call carries).
	Principals map[string]string `json:"principals"`
	// Reads maps each principal whose call reads mail to the view (Views)
	// its reads go through.
	Reads map[string]string `json:"reads,omitempty"`
	// UnboundRefusals are the principals told how many refusals named no trail.
	UnboundRefusals []string `json:"unbound_refusals,omitempty"`
	// Credentials are the kinds of credential (Credentials) a call may
	// present to be bound.
	Credentials []string `json:"credentials,omitempty"`
	// WaitSeconds is the longest the call waits; 0: it does not wait.
	WaitSeconds int    `json:"wait_seconds,omitempty"`
	Framing     string `json:"framing"` // "json", or "send": a send's frame
	Request     string `json:"request"`
	Response    string `json:"response"`
}

// Credential is a kind of credential a call presents.
type Credential struct {
	Kind string `json:"kind"`
	// Name is the trail's name of it ("mail_api_token", "smtp_port",
	// "netns", "capability_header", "bootstrap_token", "inbox_token",
	// "read_capability", "sigv4_signature").
	Name string `json:"name"`
	// Keys are, by profile, the names of the trial's secrets it may be;
	// none for a credential keyed by a port, a door or a signature.
	Keys map[string][]string `json:"keys,omitempty"`
	// GrantOf, for a credential that is a grant, is the principal it must be a grant of.
	GrantOf string   `json:"grant_of,omitempty"`
	Rules   []string `json:"rules,omitempty"`
	Refusal string   `json:"refusal"` // the code it is refused with
}

// View is what a reader sees.
type View struct {
	Name      string `json:"name"`
	Door      string `json:"door"`      // the trail's door for its reads
	Recipient bool   `json:"recipient"` // may narrow a read to one recipient
	HTML      bool   `json:"html"`      // is given a message's HTML part
	Faults    bool   `json:"faults"`    // is told which messages a fault delayed or duplicated
	Labels    bool   `json:"labels"`    // is told the label of planted mail
	Agent     bool   `json:"agent"`     // its reads are the agent's (a get is an open)
}

// Waits reports whether the method waits.
func (r Row) Waits() bool { return r.WaitSeconds > 0 }

// Keys is, for each credential name and profile, the names of the
// trial's secrets it may be.
func (p PolicyTable) Keys() map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for _, c := range p.Credentials {
		if c.Keys != nil && out[c.Name] == nil {
			out[c.Name] = c.Keys
		}
	}
	return out
}

// kindNames name the kinds of credential in the exported table.
var kindNames = map[credKind]string{credWrite: "bearer", credAuth: "smtp_auth", credPort: "smtp_port",
	credSelect: "smtp_select", credBootstrap: "bootstrap", credInbox: "inbox", credRead: "read",
	credDoor: "netns_door", credSigV4: "sigv4", credOperator: "operator"}

// Policy is the table as exported.
func Policy() PolicyTable {
	var p PolicyTable
	kinds := map[credKind]bool{}
	for _, m := range table {
		r := Row{Method: m.method, Principals: map[string]string{}, WaitSeconds: int(m.waits.Seconds()),
			Framing: framingNames[m.framing], Request: typeName(m.call.request), Response: typeName(m.call.response)}
		for _, cr := range m.accepts {
			r.Credentials = append(r.Credentials, kindNames[cr.kind])
			kinds[cr.kind] = true
		}
		for _, who := range principals {
			a, ok := m.who[who]
			if !ok {
				continue
			}
			r.Principals[who.String()] = bindingNames[a.bind]
			if a.view != nil {
				if r.Reads == nil {
					r.Reads = map[string]string{}
				}
				r.Reads[who.String()] = a.view.name
			}
			if a.unbounds {
				r.UnboundRefusals = append(r.UnboundRefusals, who.String())
			}
		}
		p.Methods = append(p.Methods, r)
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		cr := credentials[k]
		c := Credential{Kind: kindNames[k], Name: cr.name, Refusal: cr.refused.Code}
		if cr.grantOf != nil {
			c.GrantOf = cr.grantOf.String()
		}
		for _, prof := range profiles {
			for _, s := range cr.keys[prof.name] {
				if c.Keys == nil {
					c.Keys = map[string][]string{}
				}
				c.Keys[prof.name] = append(c.Keys[prof.name], string(s))
			}
		}
		for _, r := range ruleNames {
			if cr.rules.has(r.rule) {
				c.Rules = append(c.Rules, r.name)
			}
		}
		p.Credentials = append(p.Credentials, c)
	}
	for _, v := range []*view{agentView, evaluatorView, operatorView} {
		p.Views = append(p.Views, View{Name: v.name, Door: v.door, Recipient: v.recipient, HTML: v.html,
			Faults: v.faults, Labels: v.labels, Agent: v.agent})
	}
	for _, pr := range profiles {
		p.Profiles = append(p.Profiles, Profile{Name: pr.name, APIToken: string(pr.apiToken)})
	}
	return p
}

// typeName names a request or response type as its package does; a type
// with no fields on the wire is "{}".
func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Struct && !slices.ContainsFunc(reflect.VisibleFields(t), func(f reflect.StructField) bool { return f.IsExported() }) {
		return "{}"
	}
	return t.String()
}

// String names a principal as the table does.
func (p principal) String() string {
	if p.shared {
		return "shared " + string(p.role)
	}
	return string(p.role)
}

// JSON is the table as `mail-plane policy --json` prints it.
func (p PolicyTable) JSON() []byte {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		panic(err) // plain data: a failure is a bug
	}
	return append(b, '\n')
}

// Markdown is the table as `mail-plane policy` prints it and docs/rpc.md
// shows it.
func (p PolicyTable) Markdown() string {
	var b strings.Builder
	cell := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	b.WriteString("| method |")
	for _, who := range principals {
		fmt.Fprintf(&b, " %s |", who)
	}
	b.WriteString(" credentials | waits | framing | request → response |\n|---|")
	b.WriteString(strings.Repeat("---|", len(principals)+4) + "\n")
	for _, r := range p.Methods {
		fmt.Fprintf(&b, "| %s |", r.Method)
		for _, who := range principals {
			s := r.Principals[who.String()]
			if v, ok := r.Reads[who.String()]; ok {
				s += ", reads as " + v
			}
			if slices.Contains(r.UnboundRefusals, who.String()) {
				s += ", told unbound refusals"
			}
			fmt.Fprintf(&b, " %s |", s)
		}
		wait := ""
		if r.Waits() {
			wait = fmt.Sprintf("%d s", r.WaitSeconds)
		}
		fmt.Fprintf(&b, " %s | %s | %s | %s → %s |\n", strings.Join(r.Credentials, ", "), wait, r.Framing,
			cell(r.Request), cell(r.Response))
	}
	b.WriteString("\n| credential | trail's name | candidate's keys | other profiles' keys | rules | refused with |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	keysOf := func(c Credential, profile string) string {
		if c.GrantOf != "" {
			return "a valid " + c.GrantOf + " grant"
		}
		return strings.Join(c.Keys[profile], ", ")
	}
	for _, c := range p.Credentials {
		var others []string
		for prof, ks := range c.Keys {
			if prof != "candidate" {
				others = append(others, prof+": "+strings.Join(ks, ", "))
			}
		}
		slices.Sort(others)
		if c.GrantOf != "" {
			others = []string{keysOf(c, "")}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", c.Kind, c.Name, keysOf(c, "candidate"),
			strings.Join(others, "; "), strings.Join(c.Rules, ", "), c.Refusal)
	}
	b.WriteString("\n| view | door | recipient | html | faults | labels | agent |\n|---|---|---|---|---|---|---|\n")
	yes := map[bool]string{true: "yes", false: ""}
	for _, v := range p.Views {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", v.Name, v.Door, yes[v.Recipient], yes[v.HTML],
			yes[v.Faults], yes[v.Labels], yes[v.Agent])
	}
	b.WriteString("\n| profile | its mail API's token |\n|---|---|\n")
	for _, pr := range p.Profiles {
		fmt.Fprintf(&b, "| %s | %s |\n", pr.Name, pr.APIToken)
	}
	return b.String()
}
