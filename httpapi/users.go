package httpapi

import (
	"strings"

	"github.com/gateway/gateway/domain"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
)

type userJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	Plan      string    `json:"plan"`
	CreatedAt timestamp `json:"createdAt"`
	UpdatedAt timestamp `json:"updatedAt"`
}

func userRecord(u domain.User) userJSON {
	return userJSON{ID: u.ID, Name: u.Name, Email: u.Email, Role: u.Role, Plan: u.Plan,
		CreatedAt: timestamp(u.CreatedAt), UpdatedAt: timestamp(u.UpdatedAt)}
}

func (s *Server) listUsers(ctx *fasthttp.RequestCtx, _ domain.User) error {
	list := func() ([]domain.User, error) { return s.engine(ctx).Users.List(), nil }
	if s.cfg.Cluster != nil {
		list = s.cfg.Cluster.Records().Users
	}
	users, err := list()
	if err != nil {
		return err
	}
	out := make([]userJSON, len(users))
	for i, u := range users {
		out[i] = userRecord(u)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

type createUserRequest struct {
	ID    *string `json:"id"`
	Name  string  `json:"name"`
	Email string  `json:"email"`
	Role  string  `json:"role"`
	Plan  string  `json:"plan"`
}

// createUser pre-provisions a profile: the user signs in later with this uid.
func (s *Server) createUser(ctx *fasthttp.RequestCtx, _ domain.User) error {
	var req createUserRequest
	if err := bind(ctx, &req, need("id", &req.ID)); err != nil {
		return err
	}
	u, err := s.engine(ctx).Users.Create(s.reqContext(ctx), engine.NewUser{
		ID: strings.TrimSpace(*req.ID), Name: req.Name, Email: req.Email, Role: req.Role, Plan: req.Plan,
	})
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusCreated, userRecord(u))
	return nil
}

type updateUserRequest struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	Role *string `json:"role"`
	Plan *string `json:"plan"`
}

// updateUser changes a profile's role (promotion), plan or name.
func (s *Server) updateUser(ctx *fasthttp.RequestCtx, _ domain.User) error {
	var req updateUserRequest
	if err := bind(ctx, &req, need("id", &req.ID)); err != nil {
		return err
	}
	if req.Name == nil && req.Role == nil && req.Plan == nil {
		return badInput("validation_failed", "nothing to change: send name, role and/or plan")
	}
	u, err := s.engine(ctx).Users.Update(s.reqContext(ctx), engine.UserPatch{ID: *req.ID, Name: req.Name, Role: req.Role, Plan: req.Plan})
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success bool     `json:"success"`
		User    userJSON `json:"user"`
	}{true, userRecord(u)})
	return nil
}

// clientMe is GET /api/client/me: the signed-in user's own profile (the dashboard reads its
// role here instead of trying an admin route).
func (s *Server) clientMe(ctx *fasthttp.RequestCtx, u domain.User) error {
	writeJSON(ctx, fasthttp.StatusOK, meRecord(u)) // with the store loop's settings
	return nil
}
