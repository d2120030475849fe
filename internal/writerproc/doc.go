// Package writerproc is the mail-writer process around the mail APIs of
// package writer and the SMTP server of package smtpd: its command line,
// its listeners (HTTP, SMTP, and with a certificate implicit-TLS SMTP and
// HTTPS), the per-trial SMTP ports and netns doors a supervisor hands over
// its port control socket (ports.go, doors.go), and the reports of
// sessions refused over the connection cap to the plane (report.go).
//
// It decides nothing about mail: every listener serves writer's handler
// or an smtpd.Server, and those hand each message to the plane.
package writerproc
