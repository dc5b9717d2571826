package httpapi

import "github.com/valyala/fasthttp"

// routes is the whole route table: method, path, body limit (0 = default), handler.
func (s *Server) routes() {
	const GET, POST, PATCH, PUT, DELETE = fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPatch, fasthttp.MethodPut, fasthttp.MethodDelete

	s.route(GET, "/healthz", 0, s.healthz)
	s.route(GET, "/readyz", 0, s.readyz)
	s.route(GET, "/metrics", 0, s.metricsText)
	s.route(GET, "/api/openapi.json", 0, s.openapi)

	// Public message API (API key).
	s.route(GET, "/api/v1/account", 0, s.account)

	// Admin (ID token, role admin).
	s.route(GET, "/api/admin/apikeys", 0, s.admin(s.listKeys))
	s.route(POST, "/api/admin/apikeys", 0, s.admin(s.createKey))
	s.route(PATCH, "/api/admin/apikeys", 0, s.admin(s.updateKey))
	s.route(DELETE, "/api/admin/apikeys", 0, s.admin(s.deleteKey))
	s.route(POST, "/api/admin/apikeys/validate", 0, s.validate)
	s.route(GET, "/api/admin/users", 0, s.admin(s.listUsers))
	s.route(POST, "/api/admin/users", 0, s.admin(s.createUser))
	s.route(PATCH, "/api/admin/users", 0, s.admin(s.updateUser))

	// Dashboard (ID token).
	s.route(GET, "/api/client/apikeys", 0, s.client(s.clientKeys))
	_ = PUT
}
