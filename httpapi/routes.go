package httpapi

import "github.com/valyala/fasthttp"

// routes is the whole route table: method, path, body limit (0 = default), the partition the
// request runs on in a cluster (cluster.go: here, byKey, byCaller, adminActsOn(...), ...),
// handler. A route on the engine needs a partition other than here: a cluster node has no
// engine of its own.
func (s *Server) routes() {
	const GET, POST, PATCH, PUT, DELETE = fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPatch, fasthttp.MethodPut, fasthttp.MethodDelete

	s.route(GET, "/healthz", 0, here, s.healthz)
	s.route(GET, "/readyz", 0, here, s.readyz)
	// HEAD too, as RFC 9110 asks of what answers GET: probes and uptime checkers often send it
	// (fasthttp writes no body for HEAD).
	s.route(fasthttp.MethodHead, "/healthz", 0, here, s.healthz)
	s.route(fasthttp.MethodHead, "/readyz", 0, here, s.readyz)
	s.route(GET, "/metrics", 0, here, s.metricsText)
	s.route(GET, "/api/openapi.json", 0, here, s.openapi)

	// Public message API (API key).
	s.route(GET, "/api/v1/account", 0, byKey, s.account)
	s.route(POST, "/api/v1/messages/send", mediaBodyLimit(s.cfg.Media.MaxBytes), byKey, s.v1Send)
	s.route(POST, "/api/v1/messages/send-image", mediaBodyLimit(s.cfg.Media.MaxBytes), byKey, s.v1SendImage)
	s.route(POST, "/api/v1/messages/send-bulk", 0, byKey, s.v1SendBulk)
	s.route(GET, "/api/v1/messages", 0, byKey, s.v1Messages)
	s.route(GET, "/api/v1/messages/{id}", 0, byKey, s.v1Message)
	s.route(DELETE, "/api/v1/messages/{id}", 0, byKey, s.v1Delete)
	s.route(POST, "/api/v1/messages/{id}/edit", 0, byKey, s.v1Edit)
	s.route(POST, "/api/v1/messages/{id}/read", 0, byKey, s.v1Read)
	s.route(GET, "/api/v1/messages/{id}/votes", 0, byKey, s.v1Votes)
	s.route(GET, "/api/v1/contacts", 0, byKey, s.v1Contacts)
	s.route(POST, "/api/v1/contacts/check", 0, byKey, s.v1ContactsCheck)
	s.route(GET, "/api/v1/groups", 0, byKey, s.v1Groups)
	s.route(POST, "/api/v1/groups", 0, byKey, s.v1CreateGroup)
	s.route(POST, "/api/v1/groups/{id}/participants", 0, byKey, s.v1GroupParticipants)
	s.route(GET, "/api/v1/groups/{id}/invite", 0, byKey, s.v1GroupInvite)
	s.route(GET, "/api/v1/campaigns/{id}", 0, byKey, s.v1Campaign)
	s.route(DELETE, "/api/v1/campaigns/{id}", 0, byKey, s.v1CancelCampaign)
	s.route(GET, "/api/v1/optouts", 0, byKey, s.v1OptOuts)
	s.route(POST, "/api/v1/optouts", 0, byKey, s.v1AddOptOuts)
	s.route(DELETE, "/api/v1/optouts", 0, byKey, s.v1DeleteOptOuts)

	// Admin (ID token, role admin).
	s.route(GET, "/api/admin/apikeys", 0, here, s.admin(s.listKeys))
	s.route(POST, "/api/admin/apikeys", 0, adminActsOn(bodyUser("userId")), s.admin(s.createKey))
	s.route(PATCH, "/api/admin/apikeys", 0, adminActsOn(bodyRecord("id", "apikey")), s.admin(s.updateKey))
	s.route(DELETE, "/api/admin/apikeys", 0, adminActsOn(queryRecord("id", "apikey")), s.admin(s.deleteKey))
	s.route(POST, "/api/admin/apikeys/validate", 0, byCheckedKey, s.limitGuesses(byClient("validate:"), s.validate))
	s.route(GET, "/api/admin/users", 0, here, s.admin(s.listUsers))
	s.route(POST, "/api/admin/users", 0, adminActsOn(bodyUser("id")), s.admin(s.createUser))
	s.route(PATCH, "/api/admin/users", 0, adminActsOn(bodyUser("id")), s.admin(s.updateUser))
	s.route(GET, "/api/admin/cluster", 0, here, s.admin(s.clusterState))

	// Internal admin-prefixed routes: public inside --internal-cidrs, else an admin token.
	s.route(GET, "/api/admin/sessions", 0, here, s.internal(s.listSessions))
	s.route(POST, "/api/admin/sessions/create", 0, internalActsOn(newSession), s.internal(s.createSession))
	s.route(POST, "/api/admin/sessions/assign", 0, internalActsOn(bodyRecord("sessionId", "session")), s.internal(s.assignSession))
	s.route(PATCH, "/api/admin/sessions", 0, adminActsOn(bodyRecord("id", "session")), s.admin(s.setSessionPacing))
	s.route(DELETE, "/api/admin/sessions", 0, adminActsOn(queryRecord("id", "session")), s.admin(s.deleteSession))

	// Dashboard (ID token).
	s.route(GET, "/api/client/me", 0, byCaller, s.client(s.clientMe))
	s.route(PATCH, "/api/client/me", 0, byCaller, s.client(s.patchMe))
	s.route(GET, "/api/client/optouts", 0, byCaller, s.client(s.clientOptOuts))
	s.route(POST, "/api/client/optouts", 0, byCaller, s.client(s.addClientOptOuts))
	s.route(DELETE, "/api/client/optouts", 0, byCaller, s.client(s.deleteClientOptOuts))
	s.route(GET, "/api/client/apikeys", 0, byCaller, s.client(s.clientKeys))
	s.route(GET, "/api/client/qr", 0, byCaller, s.client(s.clientQR))
	s.route(GET, "/api/client/status", 0, byCaller, s.clientMemo(s.clientStatus))
	s.route(POST, "/api/client/start", 0, byCaller, s.client(s.clientStart))
	s.route(POST, "/api/client/pair-code", 0, byCaller, s.client(s.clientPairCode))
	s.route(POST, "/api/client/logout", 0, byCaller, s.client(s.clientLogout))
	s.route(POST, "/api/client/send", mediaBodyLimit(s.cfg.Media.MaxBytes), byCaller, s.client(s.clientSend))
	s.route(POST, "/api/client/templates/test", 0, byCaller, s.client(s.templateTest))
	s.route(GET, "/api/client/templates", 0, byCaller, s.client(s.clientTemplates))
	s.route(PUT, "/api/client/templates", 0, byCaller, s.client(s.putTemplate))
	s.route(POST, "/api/client/store/connect", 0, byCaller, s.client(s.storeConnect))
	s.route(POST, "/api/client/store/verify-shopify", 0, byCaller, s.client(s.verifyShopify))
	s.route(GET, "/api/client/campaigns", 0, byCaller, s.client(s.clientCampaigns))
	s.route(POST, "/api/client/campaigns", 0, byCaller, s.client(s.startClientCampaign))
	s.route(GET, "/api/client/campaigns/details", 0, byCaller, s.client(s.clientCampaign))
	s.route(DELETE, "/api/client/campaigns", 0, byCaller, s.client(s.cancelClientCampaign))
	s.route(GET, "/api/client/messages", 0, byCaller, s.client(s.clientMessages))
	s.route(GET, "/api/client/groups", 0, byCaller, s.client(s.clientGroups))
	s.route(GET, "/api/client/store", 0, byCaller, s.client(s.clientStore))
	s.route(DELETE, "/api/client/store", 0, byCaller, s.client(s.deleteStore))

	// The Cloud API as a second network (DESIGN.md section 17): a number, its templates, the
	// routing between it and the linked session (ID token); Meta's webhooks (public, signed).
	s.route(POST, "/api/client/cloud/connect", 0, byCloudConnect, s.client(s.clientCloudConnect))
	s.route(GET, "/api/client/cloud", 0, byCaller, s.client(s.clientCloud))
	s.route(DELETE, "/api/client/cloud", 0, byCaller, s.client(s.clientCloudDisconnect))
	s.route(GET, "/api/client/cloud/templates", 0, byCaller, s.client(s.clientCloudTemplates))
	s.route(GET, "/api/client/routing", 0, byCaller, s.client(s.clientRouting))
	s.route(PATCH, "/api/client/routing", 0, byCaller, s.client(s.patchRouting))
	s.route(GET, "/api/cloud/webhook", 0, byCloudWebhook, s.cloudWebhookVerify)
	s.route(POST, "/api/cloud/webhook", 0, byCloudWebhook, s.cloudWebhook)

	// The Cloud-API-shaped front (DESIGN.md section 20; API key as the access token): front.go.
	s.frontRoutes()

	// Events out: webhook subscriptions (ID token).
	if s.cfg.Webhooks != nil || s.cfg.Cluster != nil {
		s.route(GET, "/api/client/webhooks", 0, byCaller, s.client(s.listWebhooks))
		s.route(POST, "/api/client/webhooks", 0, byCaller, s.client(s.createWebhook))
		s.route(DELETE, "/api/client/webhooks", 0, byCaller, s.client(s.deleteWebhook))
		s.route(GET, "/api/client/webhooks/deliveries", 0, byCaller, s.client(s.webhookDeliveries))
		s.route(POST, "/api/client/webhooks/test", 0, byCaller, s.client(s.testWebhook))
		s.route(POST, "/api/client/webhooks/redeliver", 0, byCaller, s.client(s.redeliverWebhook))
		s.route(GET, "/api/client/events/stream", 0, here, s.eventStream)
	}

	// Store integration (SPEC.md section 4.5): connecting (ID token) and the platform's calls (public).
	s.route(POST, "/api/ecom/oauth-init", 0, byCaller, s.client(s.oauthInit))
	s.route(GET, "/api/ecom/callback", 0, byOAuthState, s.ecomCallback)
	s.route(POST, "/api/ecom/manual-connect", 0, byCaller, s.client(s.manualConnect))
	s.route(POST, "/api/ecom/native-connect", 0, byCaller, s.client(s.nativeConnect))
	s.route(POST, "/api/ecom/webhook", 0, byStoreWebhook, s.limitGuesses(byShop, s.ecomWebhook))
	s.route(GET, "/api/ecom/test", 0, here, s.ecomTest)

	// The dashboard, the API reference page and the dev sign-in (dashboard.go).
	s.dashboardRoutes()

	// The simulated network's dev controls (--network sim only; internal like the admin-prefixed
	// routes: they read every user's deliveries and link sessions).
	if s.cfg.Sim != nil {
		s.route(POST, "/api/dev/sim/scan", 0, here, s.internal(s.simScan))
		s.route(POST, "/api/dev/sim/pair", 0, here, s.internal(s.simPair))
		s.route(GET, "/api/dev/sim/messages", 0, here, s.internal(s.simMessages))
		s.route(POST, "/api/dev/sim/unregistered", 0, here, s.internal(s.simUnregistered))
		s.route(POST, "/api/dev/sim/drop", 0, here, s.internal(s.simDrop))
		s.route(POST, "/api/dev/sim/latency", 0, here, s.internal(s.simLatency))
		s.route(POST, "/api/dev/sim/read", 0, here, s.internal(s.simRead))
		s.route(POST, "/api/dev/sim/inbound", 0, here, s.internal(s.simInbound))
		s.route(POST, "/api/dev/sim/refuse", 0, here, s.internal(s.simRefuse))
		s.route(POST, "/api/dev/sim/timelock", 0, here, s.internal(s.simTimelock))
		s.route(POST, "/api/dev/sim/ban", 0, here, s.internal(s.simBan))
		s.route(GET, "/api/dev/sim/groups", 0, here, s.internal(s.simGroups))
		s.route(GET, "/api/dev/sim/read", 0, here, s.internal(s.simReads))
	}
}
