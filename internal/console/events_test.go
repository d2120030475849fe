package console

import (
	"encoding/json"
	"strings"
	"testing"
)

// Every kind of event the plane writes (package evidence's actions at
// their doors, with their outcomes) reads as a sentence, and the timeline
// is newest first. The lines are shaped as the plane writes them
// (internal/plane/evidence.go, internal/ledger); TestTrialPage sees the
// main ones come from a real run.
func TestTimelineWording(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"door":"writer-http","action":"send","outcome":"accepted","credential":"mail_api_token","from":"no-reply@c.example","to":["ann@example.com"],"message_ids":[3],"email_id":"e"}`,
			"The candidate's site sent message 3 to ann@example.com."},
		{`{"door":"writer-http","action":"send","outcome":"accepted","api":"sendgrid","to":["ann@example.com","bob@example.com"],"message_ids":[4]}`,
			"The candidate's site (SendGrid API) sent message 4 to ann@example.com, bob@example.com."},
		{`{"door":"writer-smtp","action":"send","outcome":"accepted","to":["ann@example.com"],"message_ids":[5]}`,
			"The candidate's site, over SMTP, sent message 5 to ann@example.com."},
		{`{"door":"writer-http","action":"send","outcome":"accepted","to":["ann@example.com"],"message_ids":[3],"replayed":true}`,
			"The candidate's site sent message 3 to ann@example.com (a retry: the first answer was replayed)."},
		{`{"door":"writer-http","action":"send","outcome":"refused","code":"invalid_envelope","credential":"mail_api_token"}`,
			"The candidate's site tried to send a message: refused (invalid envelope)."},
		{`{"door":"writer-http","action":"send","outcome":"refused","code":"unauthenticated","count":4}`,
			"The candidate's site tried to send a message: refused (unauthenticated) (4 times)."},
		{`{"door":"writer-http","action":"send","outcome":"failed","code":"store_unavailable"}`,
			"The candidate's site tried to send a message: it failed, the plane or its store did not answer (store unavailable)."},
		{`{"door":"writer-http","action":"send","outcome":"refused","code":"rate_limited","fault":{"rule":0,"do":"refuse","send":1,"status":429}}`,
			"The candidate's site tried to send a message: refused (rate limited) — fault injected by rule 0: refuse 429."},
		{`{"door":"writer-http","action":"bootstrap","outcome":"accepted","credential":"bootstrap_token"}`,
			"The candidate's site fetched its write capability (bootstrap)."},
		{`{"door":"writer-smtp","action":"connect","outcome":"refused","code":"connection_limit","count":5}`,
			"An SMTP client tried to connect over SMTP: refused (connection limit) (5 times)."},
		{`{"door":"inbox","action":"list","outcome":"accepted","credential":"inbox_token","message_ids":[1,2]}`,
			"The agent listed the mail: messages 1, 2."},
		{`{"door":"inbox","action":"open","outcome":"accepted","code":"not_found","credential":"inbox_token","message_ids":[7]}`,
			"The agent tried to open message 7: not found."},
		{`{"door":"inbox-mcp","action":"open","outcome":"accepted","message_ids":[2],"label":"phish-1"}`,
			`The agent (MCP) opened message 2 — planted mail labelled "phish-1".`},
		{`{"door":"inbox","action":"click","outcome":"accepted","message_ids":[2],"link":0,"host":"site.example"}`,
			"The agent clicked link 1 of message 2 (site.example)."},
		{`{"door":"inbox","action":"click","outcome":"refused","code":"not_found","message_ids":[2],"link":9}`,
			"The agent tried to click link 10 of message 2: refused (not found)."},
		{`{"door":"gateway","action":"list","outcome":"accepted","credential":"read_capability","recipient":"ann@example.com","message_ids":[1]}`,
			"The evaluator listed the mail for ann@example.com: message 1."},
		{`{"door":"gateway","action":"latest","outcome":"accepted","message_ids":[3]}`,
			"The evaluator read the latest message, message 3."},
		{`{"door":"gateway","action":"latest","outcome":"accepted","code":"not_found"}`,
			"The evaluator tried to read the latest message: not found."},
		{`{"door":"gateway","action":"get","outcome":"accepted","message_ids":[3]}`,
			"The evaluator read message 3."},
		{`{"door":"gateway","action":"wait","outcome":"accepted","message_ids":[4]}`,
			"The evaluator waited for mail and got message 4."},
		{`{"door":"gateway","action":"wait","outcome":"accepted","code":"not_found","recipient":"ann@example.com"}`,
			"The evaluator waited for mail for ann@example.com: none came."},
		{`{"door":"gateway","action":"list","outcome":"refused","code":"permission_denied"}`,
			"The evaluator tried to list the mail: refused (permission denied)."},
		{`{"door":"plane","action":"plant","outcome":"accepted","to":["agent@example.com"],"message_ids":[6],"label":"phish-1"}`,
			`The evaluator planted message 6 for agent@example.com — planted mail labelled "phish-1".`},
		{`{"door":"plane","action":"open","outcome":"accepted"}`, "The trial was opened."},
		{`{"door":"plane","action":"open","outcome":"accepted","detail":"trial-old"}`, "The trial moved here from trial-old."},
		{`{"door":"plane","action":"rotate","outcome":"accepted","detail":"trial-new"}`, "The trial moved to a new namespace, trial-new; this one is sealed."},
		{`{"door":"plane","action":"seal","outcome":"accepted","code":"port_taken"}`, "The trial was sealed (port taken): it takes no more mail."},
		{`{"door":"plane","action":"seal","outcome":"accepted"}`, "The trial was sealed: it takes no more mail."},
		{`{"door":"plane","action":"close","outcome":"accepted"}`, "The trial was closed."},
		{`{"door":"plane","action":"expire","outcome":"accepted"}`, "The trial expired (its TTL ran out) and was closed."},
		{`{"door":"plane","action":"port_moved","outcome":"accepted","old_port":46527,"new_port":41177}`,
			"The trial's SMTP port was taken while the stack was stopped; it moved from 46527 to 41177."},
		{`{"door":"plane","action":"budget","outcome":"refused","code":"event_budget_full"}`,
			"The trail's event budget is full: from here on, events other than sends and the trial's life are only counted."},
		{`{"door":"plane","action":"summary","outcome":"refused","code":"event_budget_full","count":13,"counts":{"open/accepted":1,"list/accepted":12}}`,
			"Counted, not recorded one by one: 12 lists accepted, 1 open accepted."},
		{`{"door":"plane","action":"faults","outcome":"accepted","count":2}`, "A fault schedule of 2 rules was set."},
		{`{"door":"plane","action":"faults","outcome":"accepted"}`, "The trial's fault schedule was cleared."},
		{`{"door":"plane","action":"deliver","outcome":"accepted","message_ids":[8]}`, "Delayed message 8 became visible."},
		{`{"door":"gateway","action":"teleport","outcome":"accepted"}`, "The evaluator did teleport."},
	} {
		tl := timeline([]json.RawMessage{json.RawMessage(c.line)})
		if len(tl) != 1 || tl[0].Summary != c.want {
			t.Errorf("%s\n  reads %q\n  want  %q", c.line, tl[0].Summary, c.want)
		}
		if strings.Contains(tl[0].Summary, "_") {
			t.Errorf("%s reads with a code's underscore: %q", c.line, tl[0].Summary)
		}
	}

	tl := timeline([]json.RawMessage{json.RawMessage(`{"seq":1,"door":"plane","action":"open","outcome":"accepted"}`),
		json.RawMessage(`{"seq":3,"door":"plane","action":"close","outcome":"accepted"}`), json.RawMessage(`not json`),
		json.RawMessage(`{"seq":2,"door":"gateway","action":"list","outcome":"accepted"}`)})
	if len(tl) != 3 || tl[0].Seq != 3 || tl[1].Seq != 2 || tl[2].Seq != 1 {
		t.Fatalf("the timeline is not newest first: %+v", tl)
	}
}
