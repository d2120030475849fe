package gateway_test

import (
	"reflect"
	"testing"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// member is one JSON member of a struct: its name, its options and the
// Go kind of its value (a struct's members recursively, by name).
type member struct {
	name, kind string
}

func members(t reflect.Type) []member {
	var out []member
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		out = append(out, member{tag, kindOf(f.Type)})
	}
	return out
}

func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + kindOf(t.Elem())
	case reflect.Slice:
		return "[]" + kindOf(t.Elem())
	case reflect.Map:
		return "map[" + kindOf(t.Key()) + "]" + kindOf(t.Elem())
	case reflect.Struct:
		s := "{"
		for _, m := range members(t) {
			s += m.name + " " + m.kind + "; "
		}
		return s + "}"
	}
	return t.Kind().String()
}

// mailclient needs nothing but the standard library (evaluators copy it
// into their harnesses; its deps_test holds it to that), and mail-inbox
// must not link it (cmd/mail-inbox/deps_test.go), so neither side can
// import the other's types: mailclient keeps copies of the trail's event
// and of the plane's attachment. These are pinned here instead: the
// same members, in the same order, with the same options and kinds, so a
// member added or renamed on one side fails until the other follows.
func TestWireCopiesAgree(t *testing.T) {
	for _, c := range []struct {
		name         string
		ours, theirs reflect.Type
		// same: theirs's tags that differ from ours on purpose, with ours
		same map[string]string
	}{
		// Hash is left out of the line it is the hash of (evidence), and is
		// always present on a line read back (mailclient).
		{"mailclient.Event / evidence.Event", reflect.TypeFor[mailclient.Event](), reflect.TypeFor[evidence.Event](), map[string]string{"hash,omitempty": "hash"}},
		{"mailclient.Attachment / rpc.Attachment", reflect.TypeFor[mailclient.Attachment](), reflect.TypeFor[rpc.Attachment](), nil},
	} {
		ours, theirs := members(c.ours), members(c.theirs)
		for i := range theirs {
			if alt, ok := c.same[theirs[i].name]; ok {
				theirs[i].name = alt
			}
		}
		if !reflect.DeepEqual(ours, theirs) {
			t.Errorf("%s drifted:\n ours   %v\n theirs %v", c.name, ours, theirs)
		}
	}
}
