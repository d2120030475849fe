// Command gowire lets the Python client's tests compare it with the Go
// client, pkg/mailclient, so that the two cannot drift:
//
//	gowire fields        the JSON keys and kinds of mailclient.Message, recursively
//	gowire decode        a message JSON on stdin, as mailclient decodes and re-encodes it
//	gowire calls URL     the Go client's calls against URL (a recorder), one per line
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/websitebench/mailplane/pkg/mailclient"
)

// field is one JSON key of a struct: its name and kind ("string" (a
// time.Time too), "int", "bool", "list of K", "nullable K", or "object"
// with its fields).
type field struct {
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`
	Fields []field `json:"fields,omitempty"`
}

func describe(t reflect.Type) (string, []field) {
	if t == reflect.TypeOf(time.Time{}) {
		return "string", nil // RFC 3339 on the wire
	}
	switch t.Kind() {
	case reflect.String:
		return "string", nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int", nil
	case reflect.Bool:
		return "bool", nil
	case reflect.Slice:
		k, f := describe(t.Elem())
		return "list of " + k, f
	case reflect.Pointer:
		k, f := describe(t.Elem())
		return "nullable " + k, f
	case reflect.Struct:
		var fs []field
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "-" || !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			k, sub := describe(sf.Type)
			fs = append(fs, field{Name: name, Kind: k, Fields: sub})
		}
		return "object", fs
	}
	return t.Kind().String(), nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gowire fields | decode | calls URL")
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	switch os.Args[1] {
	case "fields":
		_, fs := describe(reflect.TypeOf(mailclient.Message{}))
		check(enc.Encode(fs))
	case "decode":
		var m mailclient.Message
		check(json.NewDecoder(os.Stdin).Decode(&m))
		check(enc.Encode(m))
	case "calls":
		// The same calls as test_wire.py's Python side, in the same order;
		// the recorder answers each.
		c := mailclient.New(os.Args[2], "trial-0123456789abcdef0123456789abcdef", "cap-for-the-recorder")
		ctx := context.Background()
		_, err := c.List(ctx, mailclient.Query{})
		check(err)
		_, err = c.List(ctx, mailclient.Query{Recipient: "Ada Lovelace+x@Example.com", After: 2})
		check(err)
		_, err = c.Latest(ctx, mailclient.Query{Recipient: "ada@example.com"})
		check(err)
		_, err = c.Get(ctx, 7)
		check(err)
		_, err = c.List(ctx, mailclient.Query{Recipient: "ada@example.com", After: 3, Wait: 1500 * time.Millisecond})
		check(err)
		_, err = c.Latest(ctx, mailclient.Query{After: 4, Wait: 60 * time.Second})
		check(err)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gowire:", err)
		os.Exit(1)
	}
}
