package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/actors/key"
	"github.com/gateway/gateway/persist"
)

// Roles.
const (
	RoleClient = "client"
	RoleAdmin  = "admin"
)

// Principal is a caller proven by an ID token.
type Principal struct {
	UID   string
	Name  string
	Email string
	// ClaimsAdmin: the token says role admin. Honoured only with Config.DevRoles.
	ClaimsAdmin bool
}

// userDirectory caches every user profile; storage is written through.
type userDirectory struct {
	mu     sync.RWMutex
	byID   map[string]persist.User
	admins map[string]bool // --admin-uids
	create sync.Mutex      // serialises first-call profile creation
}

func (d *userDirectory) init(adminUIDs []string) {
	d.byID = map[string]persist.User{}
	d.admins = map[string]bool{}
	for _, uid := range adminUIDs {
		if uid = strings.TrimSpace(uid); uid != "" {
			d.admins[uid] = true
		}
	}
}

func (d *userDirectory) get(id string) (persist.User, bool) {
	d.mu.RLock()
	u, ok := d.byID[id]
	d.mu.RUnlock()
	return u, ok
}

func (d *userDirectory) put(u persist.User) {
	d.mu.Lock()
	d.byID[u.ID] = u
	d.mu.Unlock()
}

// Authenticate returns the caller's profile, creating it on the first authenticated call, with
// the effective role: admin when the uid is in --admin-uids, the profile was promoted, or (dev
// auth only) the token says so.
func (e *Engine) Authenticate(ctx context.Context, p Principal) (persist.User, error) {
	if err := checkID("uid", p.UID); err != nil {
		return persist.User{}, err
	}
	u, ok := e.users.get(p.UID)
	if !ok {
		var err error
		if u, err = e.createProfile(ctx, p); err != nil {
			return persist.User{}, err
		}
	}
	if e.users.admins[p.UID] || (e.cfg.DevRoles && p.ClaimsAdmin) {
		u.Role = RoleAdmin
	}
	return u, nil
}

func (e *Engine) createProfile(ctx context.Context, p Principal) (persist.User, error) {
	e.users.create.Lock()
	defer e.users.create.Unlock()
	if u, ok := e.users.get(p.UID); ok {
		return u, nil
	}
	now := e.Now().UTC()
	u := persist.User{ID: p.UID, Name: p.Name, Email: p.Email, Role: RoleClient, Plan: e.cfg.DefaultPlan, CreatedAt: now, UpdatedAt: now}
	if e.users.admins[p.UID] || (e.cfg.DevRoles && p.ClaimsAdmin) {
		u.Role = RoleAdmin
	}
	if err := e.cfg.Store.PutUser(ctx, u); err != nil {
		return persist.User{}, fmt.Errorf("%w: save profile: %v", ErrUnavailable, err)
	}
	e.users.put(u)
	e.log.Info("user profile created", "uid", u.ID, "role", u.Role)
	return u, nil
}

// User returns a profile by id.
func (e *Engine) User(id string) (persist.User, error) {
	u, ok := e.users.get(id)
	if !ok {
		return persist.User{}, fmt.Errorf("%w: %s", ErrUserNotFound, id)
	}
	return u, nil
}

// Users lists every profile by id.
func (e *Engine) Users() []persist.User {
	e.users.mu.RLock()
	out := make([]persist.User, 0, len(e.users.byID))
	for _, u := range e.users.byID {
		out = append(out, u)
	}
	e.users.mu.RUnlock()
	slices.SortFunc(out, func(a, b persist.User) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// NewUser is an administrator's pre-provisioned profile.
type NewUser struct {
	ID, Name, Email, Role, Plan string
}

// CreateUser pre-provisions a profile (the user signs in later with this uid).
func (e *Engine) CreateUser(ctx context.Context, n NewUser) (persist.User, error) {
	if n.Role == "" {
		n.Role = RoleClient
	}
	if n.Plan == "" {
		n.Plan = e.cfg.DefaultPlan
	}
	if err := e.checkRolePlan(n.Role, n.Plan); err != nil {
		return persist.User{}, err
	}
	if err := checkID("id", n.ID); err != nil {
		return persist.User{}, err
	}
	if err := checkName("name", n.Name); err != nil {
		return persist.User{}, err
	}
	if err := checkName("email", n.Email); err != nil {
		return persist.User{}, err
	}
	e.users.create.Lock()
	defer e.users.create.Unlock()
	if _, ok := e.users.get(n.ID); ok {
		return persist.User{}, fmt.Errorf("%w: user %s", ErrAlreadyExists, n.ID)
	}
	now := e.Now().UTC()
	u := persist.User{ID: n.ID, Name: n.Name, Email: n.Email, Role: n.Role, Plan: n.Plan, CreatedAt: now, UpdatedAt: now}
	if err := e.cfg.Store.PutUser(ctx, u); err != nil {
		return persist.User{}, fmt.Errorf("%w: save user: %v", ErrUnavailable, err)
	}
	e.users.put(u)
	return u, nil
}

// UserPatch changes some of a profile's fields (nil = unchanged).
type UserPatch struct {
	ID               string
	Name, Role, Plan *string
}

// UpdateUser applies a patch; a plan change reaches the user's key actors at once.
func (e *Engine) UpdateUser(ctx context.Context, p UserPatch) (persist.User, error) {
	e.users.create.Lock()
	defer e.users.create.Unlock()
	u, ok := e.users.get(p.ID)
	if !ok {
		return persist.User{}, fmt.Errorf("%w: %s", ErrUserNotFound, p.ID)
	}
	if p.Name != nil {
		if err := checkName("name", *p.Name); err != nil {
			return persist.User{}, err
		}
		u.Name = *p.Name
	}
	if p.Role != nil {
		u.Role = *p.Role
	}
	planChanged := p.Plan != nil && *p.Plan != u.Plan
	if p.Plan != nil {
		u.Plan = *p.Plan
	}
	if err := e.checkRolePlan(u.Role, u.Plan); err != nil {
		return persist.User{}, err
	}
	u.UpdatedAt = e.Now().UTC()
	if err := e.cfg.Store.PutUser(ctx, u); err != nil {
		return persist.User{}, fmt.Errorf("%w: save user: %v", ErrUnavailable, err)
	}
	e.users.put(u)
	if planChanged {
		plan := e.keyPlan(u.ID)
		for _, ent := range e.keys.ofOwner(u.ID) {
			e.hw.Send(ent.pid, key.SetPlan{Plan: plan})
		}
		e.hw.Send(e.account(u.ID), account.SetLimit{Limit: e.monthlyLimit(u.ID)})
	}
	return u, nil
}

func (e *Engine) checkRolePlan(role, plan string) error {
	if role != RoleClient && role != RoleAdmin {
		return fmt.Errorf("%w: role must be client or admin", ErrValidation)
	}
	if _, ok := e.cfg.Plans[plan]; !ok {
		return fmt.Errorf("%w: unknown plan %q (plans: %s)", ErrValidation, plan, strings.Join(e.cfg.Plans.Names(), ", "))
	}
	return nil
}

// clientName is the display name of a user: name, else email, else id.
func (e *Engine) clientName(uid string) string {
	u, ok := e.users.get(uid)
	switch {
	case !ok:
		return ""
	case u.Name != "":
		return u.Name
	case u.Email != "":
		return u.Email
	}
	return u.ID
}

// keyPlan is the daily cap of a user's keys.
func (e *Engine) keyPlan(uid string) key.Plan {
	name := e.cfg.DefaultPlan
	if u, ok := e.users.get(uid); ok && u.Plan != "" {
		name = u.Plan
	}
	return key.Plan{Name: name, Limit: e.cfg.Plans[name].RateLimit}
}

// Limits on identifiers and names: ids become storage keys and names appear in every list.
const (
	maxIDLen   = 255 // the longest sub OIDC allows
	maxNameLen = 200
)

// checkID accepts 1 to 255 printable ASCII characters.
func checkID(field, id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%w: %s must be 1 to %d characters", ErrValidation, field, maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return fmt.Errorf("%w: %s must be printable ASCII without spaces", ErrValidation, field)
		}
	}
	return nil
}

// checkName accepts at most 200 bytes.
func checkName(field, name string) error {
	if len(name) > maxNameLen {
		return fmt.Errorf("%w: %s must be at most %d bytes", ErrValidation, field, maxNameLen)
	}
	return nil
}
