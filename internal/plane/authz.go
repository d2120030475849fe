package plane

import "github.com/websitebench/mailplane/pkg/rpc"

// binding says what a role's call is bound to.
type binding int

const (
	bindNothing    binding = iota + 1 // health: touches no namespace
	bindTrial                         // the current namespace of the grant's own trial
	bindCapability                    // a namespace the call names, opened by its read capability
	bindPlane                         // the whole plane (admin)
)

// authz is the plane's whole authorization policy: for each method, the
// roles that may call it and what each role's call is bound to. A method
// that is not here, or a role that is not listed for it, is refused and
// logged; nothing is passed through.
var authz = map[string]map[rpc.Role]binding{
	rpc.MethodHealth: {
		rpc.RoleWriter: bindNothing, rpc.RoleInbox: bindNothing,
		rpc.RoleGateway: bindNothing, rpc.RoleAdmin: bindNothing,
	},
	rpc.MethodSend:         {rpc.RoleWriter: bindTrial},
	rpc.MethodBootstrap:    {rpc.RoleWriter: bindTrial},
	rpc.MethodList:         {rpc.RoleInbox: bindTrial, rpc.RoleGateway: bindCapability},
	rpc.MethodGet:          {rpc.RoleInbox: bindTrial, rpc.RoleGateway: bindCapability},
	rpc.MethodLatest:       {rpc.RoleGateway: bindCapability},
	rpc.MethodTrialCreate:  {rpc.RoleAdmin: bindPlane},
	rpc.MethodTrialRotate:  {rpc.RoleAdmin: bindPlane},
	rpc.MethodTrialSeal:    {rpc.RoleAdmin: bindPlane},
	rpc.MethodTrialDestroy: {rpc.RoleAdmin: bindPlane},
	rpc.MethodTrialList:    {rpc.RoleAdmin: bindPlane},
	rpc.MethodGrantCreate:  {rpc.RoleAdmin: bindPlane},
}

// Authz returns a copy of the authorization table, for tests that generate
// their matrix from it.
func Authz() map[string]map[rpc.Role]bool {
	out := make(map[string]map[rpc.Role]bool, len(authz))
	for m, roles := range authz {
		out[m] = map[rpc.Role]bool{}
		for r := range roles {
			out[m][r] = true
		}
	}
	return out
}
