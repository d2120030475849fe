package smtpd

import (
	"math"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/websitebench/mailplane/internal/limits"
)

// Failed AUTH. A session gets MaxAuthFailures attempts: the last failed one
// is answered 421 and the connection closed, so a fourth finds it closed.
// Beyond that, each failure on a listener delays its own answer by
// AuthFailureStep for every failure the listener has seen recently, at
// most limits.AuthFailureMaxDelay (or Config.AuthFailureDelay when set lower:
// mail-writer --auth-failure-delay): a scan of tokens slows to that pace per
// connection, while a correct AUTH, which never waits, is not slowed.
// Recent failures are counted with exponential decay, halving every
// AuthFailureHalfLife, so a listener forgets a burst within a minute.
const (
	MaxAuthFailures     = 3
	AuthFailureStep     = 50 * time.Millisecond
	AuthFailureHalfLife = 10 * time.Second
)

// errAuthLockout ends a session after its last allowed failed AUTH.
var errAuthLockout = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many failed authentication attempts"}

// authFailures is one listener's recent failed AUTHs, decayed with time.
type authFailures struct {
	mu    sync.Mutex
	score float64 // failures, each weighted by its age
	at    time.Time
}

// fail counts one failure and returns how long its answer waits: the
// step times the failures seen before it, bounded.
func (f *authFailures) fail(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.at.IsZero() {
		f.score *= math.Exp2(-float64(now.Sub(f.at)) / float64(AuthFailureHalfLife))
	}
	f.at = now
	delay := time.Duration(f.score * float64(AuthFailureStep))
	// Past the bound more failures change nothing but how long the
	// listener takes to forget them.
	f.score = min(f.score+1, float64(limits.AuthFailureMaxDelay/AuthFailureStep)+1)
	return min(delay, limits.AuthFailureMaxDelay)
}
