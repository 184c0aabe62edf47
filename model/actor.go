package model

// Roles a principal can have. A role says what a principal may do; the
// engine is the role of what taskdeck does on its own (polls, pushes,
// orphaning, expiry).
const (
	RoleUser     = "user"     // the local OS user, on the socket or in process
	RoleAgent    = "agent"    // an MCP agent through the proxy, named by its credential
	RoleOperator = "operator" // a remote operator: may act on every task
	RoleViewer   = "viewer"   // reads everything, changes nothing
	RoleEngine   = "engine"   // taskdeck itself
)

// Actor names who made a change: a principal, its role, and the host it
// acted from (set on a fleet). Label is a self-reported name (an agent's
// clientInfo), shown beside Name and never trusted.
type Actor struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Host  string `json:"host,omitempty"`
	Label string `json:"label,omitempty"`
}

// IsZero reports whether no actor was named.
func (a Actor) IsZero() bool { return a.Name == "" && a.Role == "" }

// CanChange reports whether the role may change records (all but a viewer).
func (a Actor) CanChange() bool { return a.Role != RoleViewer }
