package limits

import "time"

// A trial's fault schedule (package faults) is set by its operator or
// evaluator, a trusted party; these bounds keep a mistaken one from
// holding a door's connections or a plane's memory for long.
const (
	// FaultRules bounds the rules of one schedule, and FaultSends the
	// send numbers one rule's "sends" may list.
	FaultRules = 64
	FaultSends = 256

	// FaultScheduleBytes bounds a schedule's JSON.
	FaultScheduleBytes = 64 << 10

	// FaultTimeout bounds how long a "timeout" holds a request or a
	// DATA reply before it closes the connection.
	FaultTimeout = 60 * time.Second

	// FaultDelay bounds how long a "delay" keeps a message hidden.
	FaultDelay = time.Hour

	// FaultCopies bounds the copies a "duplicate" stores of one send.
	FaultCopies = 10

	// FaultRetryAfter bounds the Retry-After a refusal names, in seconds.
	FaultRetryAfter = 3600
)
