package deck

import (
	"os"
	"os/user"
	"strconv"
	"sync"

	"github.com/taskdeck/taskdeck/model"
)

// LocalUser is the principal of this process: its OS user, by name (by
// uid where the name cannot be looked up), with the user role. Frontends
// in process, and the socket for its peers of the same uid, act as it.
var LocalUser = sync.OnceValue(func() model.Actor {
	name := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return model.Actor{Name: name, Role: model.RoleUser}
})
