// Package cloudapi is Meta's WhatsApp Cloud API on the wire: the Graph API's request bodies
// (a message of every kind, a read mark, a media upload), its answers (a sent message, an
// uploaded medium, a phone number, a WABA's message templates), its error shape and codes,
// and the webhooks Meta posts (statuses and incoming messages) with their X-Hub-Signature-256.
// Both directions use it: the cloud network adapter (network/cloud) speaks to Meta with it, the
// fake Graph API of the tests (network/cloud/fakegraph) answers with it, and a gateway front
// that accepts Cloud API request bodies and sends Meta-shaped webhooks can build on the same
// types. Conversions to and from domain.Message are here too (convert.go), so every side maps
// a kind the same way.
//
// Read before writing it (DESIGN.md section 17 names the shapes it must keep):
//   - Meta's documentation, developers.facebook.com/documentation/business-messaging/whatsapp:
//     webhooks/reference/messages (incoming messages and the common envelope),
//     webhooks/reference/messages/status (statuses with pricing and errors),
//     templates/template-management (GET /{waba-id}/message_templates, its data and paging),
//     throughput (80 messages/s by default, 1,000 after the upgrade; 130429 past it; the pair
//     rate, 131056), and the Graph API changelog (developers.facebook.com/docs/graph-api/
//     changelog: the newest version, DefaultVersion).
//   - The maintained client whatsapp-api-js (github.com/Secreto31126/whatsapp-api-js, v6.2,
//     src/types.ts, src/index.ts, src/messages/*.ts): the request it sends (messaging_product,
//     recipient_type, to, type, the kind's object, context.message_id, biz_opaque_callback_data),
//     ServerSentMessageResponse, ServerErrorResponse, ServerStatusPayload, ServerMessage and the
//     interactive replies, the media upload (multipart, messaging_product=whatsapp), the read
//     mark (status "read", message_id, typing_indicator) and verifyRequestSignature (HMAC-SHA256
//     of the raw body with the app secret, "sha256=" and hex).
//
// Imports domain only: no part of the gateway's core.
package cloudapi

// DefaultVersion is the newest Graph API version Meta's changelog names (v27.0, released
// November 4, 2026); --cloud-graph-version overrides it.
const DefaultVersion = "v27.0"

// DefaultGraphURL is where the Graph API is.
const DefaultGraphURL = "https://graph.facebook.com"

// Product is every request's and answer's messaging_product.
const Product = "whatsapp"
