package main

import (
	"fmt"
	"strings"
)

// kb is a size in KiB (as /proc reports it) in KB (10³ bytes), the unit of
// the per-trial goal.
func kb(kib float64) float64 { return kib * 1024 / 1000 }

// level is the stack level with live trials (after no episode), if taken.
func (d *Density) level(live int) (StackLevel, bool) {
	for _, l := range d.Levels {
		if l.LiveTrials == live && !strings.Contains(l.When, "after") {
			return l, true
		}
	}
	return StackLevel{}, false
}

// processesConstant reports whether every level and the episodes left
// the stack with one and the same number of processes.
func (d *Density) processesConstant() bool {
	if len(d.Levels) == 0 {
		return false
	}
	n := d.Levels[0].Processes
	for _, l := range d.Levels {
		if l.Processes != n {
			return false
		}
	}
	return d.ProcsBefore == n && d.ProcsAfter == n
}

// densityGoals are the three goals for many trials on one stack.
func (r *Report) densityGoals(d *Density) {
	zero, ok0 := d.level(0)
	top, okTop := d.level(densityMax)
	ref := d.Reference
	refMem, refOpen := "", ""
	if ref != nil {
		refMem = fmt.Sprintf("; reference: %.1f KB per trial at %s (PSS of its process, %.1f → %.1f MB)",
			kb(ref.PerTrialPSS), thousands(ref.Trials), mb(ref.Before.PSS), mb(ref.After.PSS))
		refOpen = fmt.Sprintf("; reference MailPlane.trial(): p99 %.2f ms, p50 %.2f ms over %s", ref.Open.P99, ref.Open.P50, thousands(ref.Trials))
	}
	if ok0 && okTop {
		per := kb(d.PerTrialKiB)
		r.goal(fmt.Sprintf("whole stack (up, plane, 3 surfaces) ≤ %.0f KB per live trial at %s trials (PSS)", goalPerTrialKB, thousands(densityMax)),
			fmt.Sprintf("%.1f KB (%.1f MB with 0 → %.1f MB with %s; anonymous %.1f KB; %.1f KB per trial 0 → %s)%s",
				per, mb(zero.PSSKiB), mb(top.PSSKiB), thousands(densityMax), kb(d.PerTrialAnonKiB), kb(d.PerTrialMidKi), thousands(densityMid), refMem),
			per <= goalPerTrialKB)
	}
	if d.Open.N > 0 {
		r.goal(fmt.Sprintf("trial.open over the RPC: p99 ≤ %.0f ms", goalOpenP99),
			fmt.Sprintf("p99 %.2f ms, p50 %.2f ms over %s opens one after the other (first %s: p99 %.2f ms)%s%s",
				d.Open.P99, d.Open.P50, thousands(d.Open.N), thousands(d.OpenFirst.N), d.OpenFirst.P99, inTurns(d), refOpen),
			d.Open.P99 <= goalOpenP99)
	}
	if len(d.Levels) > 0 {
		var at []string
		for _, l := range d.Levels {
			at = append(at, fmt.Sprintf("%d (%s)", l.Processes, l.When))
		}
		fig := strings.Join(at, ", ")
		if ref != nil {
			fig += fmt.Sprintf("; reference: 1 process, %d threads with %s trials", ref.Threads, thousands(ref.Trials))
		}
		r.goal("processes constant in the number of trials", fig, d.processesConstant())
	}
}

// inTurns is the opens in turns at densityMax live and on an empty stack.
func inTurns(d *Density) string {
	if d.OpenAtMax.N == 0 {
		return ""
	}
	return fmt.Sprintf("; in turns, at %s live p99 %.2f ms, on a stack with 0 live p99 %.2f ms", thousands(densityMax), d.OpenAtMax.P99, d.OpenAtZero.P99)
}

// thousands prints n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// densityMarkdown is bench.md's density section.
func (r *Report) densityMarkdown(w func(string, ...any), d *Density) {
	w("\n## Density: many trials on one `mail-plane up` stack\n\n")
	w("One `mail-plane up --trials 0` (quotas off, SQLite store, run from private copies of bin/): the supervisor, the plane and the three shared surfaces (writer, inbox, gateway). "+
		"%d warm-up episodes, then trials opened one after the other with the admin RPC `trial.open` until %s and then %s are live; "+
		"each size is the whole process tree's, PSS and RSS from `/proc/PID/smaps_rollup` summed, %v after the last open. "+
		"The baseline, in the same run and before mailplane starts: `reference_density.py` drives the reference's `MailPlane(MailpitClient(socket)).trial()` "+
		"(its local_mailbox.py, given with -reference) on a Mailpit of this run, one trial opened and closed, then %s opened one after the other; "+
		"its sizes are its own process's (and, for context, Mailpit's), read the same way.\n\n",
		densityWarm, thousands(densityMid), thousands(densityMax), settle, thousands(referenceTrials))
	w("| stack | live trials | PSS MB | of which anonymous | RSS MB | processes | threads | KB per live trial (PSS, from 0) | anonymous KB per live trial |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	zero, ok0 := d.level(0)
	for _, l := range d.Levels {
		per, anon := "—", "—"
		if ok0 && l.LiveTrials > 0 {
			per = fmt.Sprintf("%.1f", kb(perTrial(zero.PSSKiB, l.PSSKiB, l.LiveTrials)))
			anon = fmt.Sprintf("%.1f", kb(perTrial(zero.PSSAnonKiB, l.PSSAnonKiB, l.LiveTrials)))
		}
		if l.LiveTrials == densityMax && !strings.Contains(l.When, "after") {
			per = "**" + per + "**"
		}
		w("| mailplane: %s | %s | %.1f | %.1f | %.1f | %d | %d | %s | %s |\n", l.When, thousands(l.LiveTrials), mb(l.PSSKiB), mb(l.PSSAnonKiB), mb(l.RSSKiB), l.Processes, l.Threads, per, anon)
	}
	if ref := d.Reference; ref != nil {
		w("| reference (%s process) | 0 | %.1f | %.1f | %.1f | 1 | %d | — | — |\n", ref.Python, mb(ref.Before.PSS), mb(ref.Before.PSSAnon), mb(ref.Before.RSS), ref.Before.Threads)
		w("| reference (%s process) | %s | %.1f | %.1f | %.1f | 1 | %d | **%.1f** (RSS: %.1f) | %.1f |\n", ref.Python, thousands(ref.Trials), mb(ref.After.PSS), mb(ref.After.PSSAnon), mb(ref.After.RSS), ref.After.Threads,
			kb(ref.PerTrialPSS), kb(ref.PerTrialRSS), kb(ref.PerTrialAnon))
		if ref.Before.Mailpit != nil && ref.After.Mailpit != nil {
			w("| Mailpit under the reference | 0 → %s | %.1f → %.1f | | %.1f → %.1f | 1 | | %.1f | |\n", thousands(ref.Trials),
				mb(ref.Before.Mailpit.PSS), mb(ref.After.Mailpit.PSS), mb(ref.Before.Mailpit.RSS), mb(ref.After.Mailpit.RSS),
				kb(perTrial(ref.Before.Mailpit.PSS, ref.After.Mailpit.PSS, ref.Trials)))
		}
	}
	w("\nPSS counts a page shared by several processes once, split among them. The stack runs from private copies of the binaries, so that its file-backed pages are shared only within it (the supervisor and the plane are one binary), not with other runs of bin/ on the machine; the anonymous part (heap, stacks) is what the stack holds for its trials.\n")
	if len(d.Levels) > 0 {
		w("\nEach process of the stack, PSS MB (anonymous in brackets):\n\n| process |")
		for _, l := range d.Levels {
			w(" %s |", l.When)
		}
		w("\n|---|%s\n", strings.Repeat("--:|", len(d.Levels)))
		for i, p := range d.Levels[0].PerProcess {
			w("| %s |", p.Process)
			for _, l := range d.Levels {
				if i < len(l.PerProcess) && l.PerProcess[i].Process == p.Process {
					w(" %.1f (%.1f) |", mb(l.PerProcess[i].PSSKiB), mb(l.PerProcess[i].PSSAnonKiB))
				} else {
					w(" ? |")
				}
			}
			w("\n")
		}
	}

	w("\n`trial.open` one after the other, each timed from the call to the bundle (mailplane: over the admin RPC, the plane's Unix socket; the reference: in its own process, no RPC):\n\n")
	w("| opens | n | p50 ms | p99 ms | max ms |\n|---|--:|--:|--:|--:|\n")
	for _, o := range []struct {
		what string
		l    Latency
	}{
		{"mailplane, 0 → " + thousands(densityMid) + " live", d.OpenFirst},
		{"mailplane, " + thousands(densityMid) + " → " + thousands(densityMax) + " live", d.OpenLater},
		{"mailplane, all", d.Open},
	} {
		w("| %s | %s | %.2f | %.2f | %.1f |\n", o.what, thousands(o.l.N), o.l.P50, o.l.P99, o.l.Max)
	}
	if d.OpenAtMax.N > 0 {
		w("| mailplane at %s live, in turns with the next row (each closed again) | %s | %.2f | %.2f | %.1f |\n", thousands(densityMax), thousands(d.OpenAtMax.N), d.OpenAtMax.P50, d.OpenAtMax.P99, d.OpenAtMax.Max)
		w("| mailplane, a second stack with 0 live, in turns with the row above | %s | %.2f | %.2f | %.1f |\n", thousands(d.OpenAtZero.N), d.OpenAtZero.P50, d.OpenAtZero.P99, d.OpenAtZero.Max)
	}
	if len(d.OpenBlocks) > 1 {
		var ps []string
		for _, b := range d.OpenBlocks {
			ps = append(ps, fmt.Sprintf("%.1f", b.P99))
		}
		w("| mailplane, p99 of each %s in turn | | | %s | |\n", thousands(densityMid), strings.Join(ps, ", "))
	}
	if ref := d.Reference; ref != nil {
		w("| reference `MailPlane.trial()`, 0 → %s live | %s | %.2f | %.2f | %.1f |\n", thousands(ref.Trials), thousands(ref.Open.N), ref.Open.P50, ref.Open.P99, ref.Open.Max)
	}

	if e := d.Episodes; e.Ops+e.Errors > 0 {
		w("\n%s episodes with %s trials live, %d at a time, each: `trial.open`; the evaluator's `GET /api/namespaces/{ns}/messages?wait=%s` on the gateway (Bearer read capability) is sent while the candidate's `POST /emails` (its mail-API token, from its environment) is; the wait wakes with the message; `GET inbox_url` shows it; `trial.close`. ",
			thousands(e.Ops+e.Errors), thousands(densityMax), densityConc, episodeWait)
		w("**%.0f episodes/s** (p50 %.2f ms, p99 %.2f ms; %d failed%s).\n\n", e.Rate, e.P50, e.P99, e.Errors, firstErr(e.FirstErr))
		w("| step | p50 ms | p99 ms | max ms |\n|---|--:|--:|--:|\n")
		for _, s := range d.Steps {
			w("| %s | %.2f | %.2f | %.1f |\n", s.Step, s.P50, s.P99, s.Max)
		}
		w("\n| | before the episodes | after |\n|---|--:|--:|\n")
		w("| processes (up and its tree) | %d | %d |\n", d.ProcsBefore, d.ProcsAfter)
		w("| disk use of the data directory (du) | %.1f MB | %.1f MB |\n", mb(d.DiskBeforeKiB), mb(d.DiskAfterKiB))
		w("| trials open, messages they hold | %s, 0 | %s, %d |\n", thousands(densityMax), thousands(d.OpenAfter), d.MessagesAfter)
	}
	if rows := r.section("density", ""); len(rows) > 0 {
		w("\nThe chart's density rows: the first %s opens next to the reference's %s; opens at %s live next to opens on a second stack with none, in turns; episodes, open to close (open, POST, wait, inbox, close) (turns of %s per side, as every throughput figure) next to the same round (POST, wait, inbox) on trials opened ahead of time, each used once, so that the difference is the open and the close.\n\n", thousands(densityMid), thousands(referenceTrials), thousands(densityMax), r.Cell)
		w("| figure | conc | mailplane /s | p50 ms | p99 ms | baseline | baseline /s | p50 ms | p99 ms | %% of baseline |\n|---|--:|--:|--:|--:|---|--:|--:|--:|--:|\n")
		for _, p := range rows {
			w("| %s | %d | %.0f | %.2f | %.2f | %s | %.0f | %.2f | %.2f | %.0f%% |\n", p.Path, p.Conc, p.Mailplane.Rate, p.Mailplane.P50, p.Mailplane.P99,
				p.Baseline.Label, p.Baseline.Rate, p.Baseline.P50, p.Baseline.P99, p.Pct)
		}
		r.errorLines(w, rows)
	}
}

func firstErr(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(", the first: %.200s", s)
}
