package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gateway/gateway/actors/key"
	"github.com/gateway/gateway/domain"
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

// Users is the user facet: the user directory (every profile, cached in memory and written
// through to storage), authentication of ID-token callers, the admin's user management, and
// each user's plan.
type Users struct {
	e *Engine
	// byID: uid → *domain.User (never changed once stored: a change stores a new one). A
	// sync.Map: every authenticated request reads it, and an RWMutex's reader count is one
	// cache line all cores write (profiled on client status, issue 32).
	byID sync.Map
	// ver counts the profiles stored (put): answers rendered from a profile are reused only
	// while it is unchanged (Keys.ValidAnswer).
	ver    atomic.Uint64
	admins map[string]bool // --admin-uids
	create sync.Mutex      // serialises first-call profile creation
}

func newUsers(e *Engine, adminUIDs []string) *Users {
	us := &Users{e: e, admins: map[string]bool{}}
	for _, uid := range adminUIDs {
		if uid = strings.TrimSpace(uid); uid != "" {
			us.admins[uid] = true
		}
	}
	return us
}

// boot puts every profile (read by the engine's boot) in the directory, and warns of each plan
// a profile names that the plan table no longer has: those users get the default plan's caps
// (planOf) until an admin moves them to a plan in the table.
func (us *Users) boot(users []domain.User) int {
	missing := map[string]int{}
	for _, u := range users {
		us.put(u)
		if _, ok := us.e.cfg.Plans[u.Plan]; !ok && u.Plan != "" {
			missing[u.Plan]++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(missing)) {
		us.e.log.Warn("users are on a plan not in the plan table; they get the default plan's caps",
			"plan", name, "users", missing[name], "default_plan", us.e.cfg.DefaultPlan)
	}
	return len(users)
}

// lookup returns a profile from the directory.
func (us *Users) lookup(id string) (domain.User, bool) {
	v, ok := us.byID.Load(id)
	if !ok {
		return domain.User{}, false
	}
	return *v.(*domain.User), true
}

func (us *Users) put(u domain.User) {
	us.byID.Store(u.ID, &u)
	us.ver.Add(1) // after the store: a reader that sees the new version reads the new profile
}

// Version is the directory's version: it rises after every profile stored (profiles are never
// removed), so what was derived from Authenticate's answer holds while it is unchanged.
func (us *Users) Version() uint64 { return us.ver.Load() }

// Authenticate returns the caller's profile, creating it on the first authenticated call, with
// the effective role: admin when the uid is in --admin-uids, the profile was promoted, or (dev
// auth only) the token says so.
func (us *Users) Authenticate(ctx context.Context, p Principal) (domain.User, error) {
	if err := checkID("uid", p.UID); err != nil {
		return domain.User{}, err
	}
	u, ok := us.lookup(p.UID)
	if !ok {
		var err error
		if u, err = us.createProfile(ctx, p); err != nil {
			return domain.User{}, err
		}
	}
	if us.admins[p.UID] || (us.e.cfg.DevRoles && p.ClaimsAdmin) {
		u.Role = RoleAdmin
	}
	return u, nil
}

func (us *Users) createProfile(ctx context.Context, p Principal) (domain.User, error) {
	us.create.Lock()
	defer us.create.Unlock()
	if u, ok := us.lookup(p.UID); ok {
		return u, nil
	}
	now := us.e.now().UTC()
	u := domain.User{ID: p.UID, Name: p.Name, Email: p.Email, Role: RoleClient, Plan: us.e.cfg.DefaultPlan, CreatedAt: now, UpdatedAt: now}
	if us.admins[p.UID] || (us.e.cfg.DevRoles && p.ClaimsAdmin) {
		u.Role = RoleAdmin
	}
	if err := us.e.cfg.Store.PutUser(ctx, u); err != nil {
		return domain.User{}, fmt.Errorf("%w: save profile: %w", domain.ErrUnavailable, err)
	}
	us.put(u)
	us.e.log.Info("user profile created", "uid", u.ID, "role", u.Role)
	return u, nil
}

// Get returns a profile by id.
func (us *Users) Get(id string) (domain.User, error) {
	u, ok := us.lookup(id)
	if !ok {
		return domain.User{}, fmt.Errorf("%w: %s", domain.ErrUserNotFound, id)
	}
	return u, nil
}

// List lists every profile by id.
func (us *Users) List() []domain.User {
	var out []domain.User
	us.byID.Range(func(_, v any) bool {
		out = append(out, *v.(*domain.User))
		return true
	})
	SortUsers(out)
	return out
}

// SortUsers puts profiles in the admin list's order: by id.
func SortUsers(us []domain.User) {
	slices.SortFunc(us, func(a, b domain.User) int { return strings.Compare(a.ID, b.ID) })
}

// NewUser is an administrator's pre-provisioned profile.
type NewUser struct {
	ID, Name, Email, Role, Plan string
}

// Create pre-provisions a profile (the user signs in later with this uid).
func (us *Users) Create(ctx context.Context, n NewUser) (domain.User, error) {
	if n.Role == "" {
		n.Role = RoleClient
	}
	if n.Plan == "" {
		n.Plan = us.e.cfg.DefaultPlan
	}
	if err := us.checkRolePlan(n.Role, n.Plan); err != nil {
		return domain.User{}, err
	}
	if err := checkID("id", n.ID); err != nil {
		return domain.User{}, err
	}
	if err := checkName("name", n.Name); err != nil {
		return domain.User{}, err
	}
	if err := checkName("email", n.Email); err != nil {
		return domain.User{}, err
	}
	us.create.Lock()
	defer us.create.Unlock()
	if _, ok := us.lookup(n.ID); ok {
		return domain.User{}, fmt.Errorf("%w: user %s", domain.ErrAlreadyExists, n.ID)
	}
	now := us.e.now().UTC()
	u := domain.User{ID: n.ID, Name: n.Name, Email: n.Email, Role: n.Role, Plan: n.Plan, CreatedAt: now, UpdatedAt: now}
	if err := us.e.cfg.Store.PutUser(ctx, u); err != nil {
		return domain.User{}, fmt.Errorf("%w: save user: %w", domain.ErrUnavailable, err)
	}
	us.put(u)
	return u, nil
}

// UserPatch changes some of a profile's fields (nil = unchanged).
type UserPatch struct {
	ID               string
	Name, Role, Plan *string
}

// Update applies a patch; a plan change reaches the user's key actors at once.
func (us *Users) Update(ctx context.Context, p UserPatch) (domain.User, error) {
	us.create.Lock()
	defer us.create.Unlock()
	u, ok := us.lookup(p.ID)
	if !ok {
		return domain.User{}, fmt.Errorf("%w: %s", domain.ErrUserNotFound, p.ID)
	}
	if p.Name != nil {
		if err := checkName("name", *p.Name); err != nil {
			return domain.User{}, err
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
	// The plan is checked only when the patch names one: a profile whose plan left the table
	// (it has the default plan's caps meanwhile) can still be renamed or have its role changed,
	// while a patch that sets a plan, even the one the profile already names, must name a plan
	// in the table.
	if err := us.checkRole(u.Role); err != nil {
		return domain.User{}, err
	}
	if p.Plan != nil {
		if err := us.checkPlan(u.Plan); err != nil {
			return domain.User{}, err
		}
	}
	u.UpdatedAt = us.e.now().UTC()
	if err := us.e.cfg.Store.PutUser(ctx, u); err != nil {
		return domain.User{}, fmt.Errorf("%w: save user: %w", domain.ErrUnavailable, err)
	}
	us.put(u)
	if planChanged {
		us.e.Keys.setPlan(u.ID, us.keyPlan(u.ID))
		us.e.Messages.setLimit(u.ID, us.planOf(u.ID).MonthlyMessages)
	}
	return u, nil
}

func (us *Users) checkRolePlan(role, plan string) error {
	if err := us.checkRole(role); err != nil {
		return err
	}
	return us.checkPlan(plan)
}

func (us *Users) checkRole(role string) error {
	if role != RoleClient && role != RoleAdmin {
		return fmt.Errorf("%w: role must be client or admin", domain.ErrValidation)
	}
	return nil
}

func (us *Users) checkPlan(plan string) error {
	if _, ok := us.e.cfg.Plans[plan]; !ok {
		return fmt.Errorf("%w: unknown plan %q (plans: %s)", domain.ErrValidation, plan, strings.Join(us.e.cfg.Plans.Names(), ", "))
	}
	return nil
}

// clientName is the display name of a user ("" when unknown).
func (us *Users) clientName(uid string) string {
	v, ok := us.byID.Load(uid)
	if !ok {
		return ""
	}
	return ClientName(*v.(*domain.User)) // the published profile, not a copy of it (every validate asks)
}

// ClientName is the display name of a user in the admin lists: name, else email, else id.
func ClientName(u domain.User) string {
	switch {
	case u.Name != "":
		return u.Name
	case u.Email != "":
		return u.Email
	}
	return u.ID
}

// keyPlan is the daily cap of a user's keys, named after the plan in force (PlanInForce).
func (us *Users) keyPlan(uid string) key.Plan {
	name, p := us.PlanInForce(uid)
	return key.Plan{Name: name, Limit: p.RateLimit}
}

// planOf is the user's plan in force (PlanInForce).
func (us *Users) planOf(uid string) domain.Plan {
	_, p := us.PlanInForce(uid)
	return p
}

// PlanInForce is the plan whose caps a user has, and its name: the plan the profile names, or
// the default plan for an unknown user, a profile without a plan, or a plan no longer in the
// table (Plans.Resolve). Every cap is read through it, so none falls open to "no cap".
func (us *Users) PlanInForce(uid string) (string, domain.Plan) {
	var name string
	if u, ok := us.lookup(uid); ok {
		name = u.Plan
	}
	return us.e.cfg.Plans.Resolve(name, us.e.cfg.DefaultPlan)
}

// Plans is the plan table in force.
func (us *Users) Plans() Plans { return us.e.cfg.Plans }

// Limits on identifiers and names: ids become storage keys and names appear in every list.
const (
	maxIDLen   = 255 // the longest sub OIDC allows
	maxNameLen = 200
)

// CheckUserID is the check Authenticate makes of a user id (a cluster node makes it before it
// reads a profile from the records).
func CheckUserID(uid string) error { return checkID("uid", uid) }

// checkID accepts 1 to 255 printable ASCII characters.
func checkID(field, id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%w: %s must be 1 to %d characters", domain.ErrValidation, field, maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return fmt.Errorf("%w: %s must be printable ASCII without spaces", domain.ErrValidation, field)
		}
	}
	return nil
}

// checkName accepts at most 200 bytes.
func checkName(field, name string) error {
	if len(name) > maxNameLen {
		return fmt.Errorf("%w: %s must be at most %d bytes", domain.ErrValidation, field, maxNameLen)
	}
	return nil
}
