package mailclient_test

import (
	"context"
	"fmt"
	"time"

	"github.com/websitebench/mailplane/pkg/mailclient"
)

// An evaluator starts waiting before the site sends the mail, then reads
// the code the agent should have typed and the link it should have opened.
func Example() {
	c := mailclient.New("http://127.0.0.1:8025", "trial-0123456789abcdef0123456789abcdef", "<read capability>")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, links, err := c.WaitCode(ctx, "user@example.com", 0)
	if err != nil {
		fmt.Println("no code:", err)
		return
	}
	fmt.Println(code, links)
}
