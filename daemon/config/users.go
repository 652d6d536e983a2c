package config

import (
	"os/user"
	"strconv"
	"sync"
	"time"
)

// userTTL is how long a uid's account (name, home, groups) is reused. Every
// RPC of a non-root caller needs it; the system's databases are read again
// after a few seconds, or at once after SIGHUP (FlushUsers).
const userTTL = 5 * time.Second

// Account is what termd needs of a local user.
type Account struct {
	User   *user.User
	Groups []string // supplementary group ids, as the system lists them
}

type cachedAccount struct {
	a   *Account
	err error
	at  time.Time
}

var users struct {
	sync.Mutex
	byUID map[uint32]cachedAccount
}

// LookupUID returns uid's account, from a short-lived cache.
func LookupUID(uid uint32) (*Account, error) {
	now := time.Now()
	users.Lock()
	c, ok := users.byUID[uid]
	users.Unlock()
	if ok && now.Sub(c.at) < userTTL {
		return c.a, c.err
	}
	var a *Account
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err == nil {
		a = &Account{User: u}
		a.Groups, _ = u.GroupIds()
	}
	users.Lock()
	if users.byUID == nil || len(users.byUID) > 4096 {
		users.byUID = map[uint32]cachedAccount{}
	}
	users.byUID[uid] = cachedAccount{a: a, err: err, at: now}
	users.Unlock()
	return a, err
}

// FlushUsers forgets cached accounts (SIGHUP: the operator changed them).
func FlushUsers() {
	users.Lock()
	users.byUID = nil
	users.Unlock()
}
