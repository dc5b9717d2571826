// Package actors holds no code: each actor kind is a sub-package with the actor, its messages,
// the interfaces it consumes (declared there, named, never function fields) and its tests.
//
//   - key: an API key's record and its daily rate limiter
//   - account: a user's monthly message allowance
//   - session: a messaging session's state machine, network client and deliverer (its ordered,
//     paced queue of accepted messages)
//   - campaign: one bulk send, a number at a time
//   - storeevents: a connected store's inbox of webhooks, turned into messages
//   - webhook: one webhook subscription's queue of signed deliveries
//
// Only the engine imports them: it spawns the actors and implements their interfaces with
// small adapter types. They import domain, the adapters' stateless parts where they need them
// (network's port, ecom's parsers, persist's ErrNotFound) and hollywood; never engine or
// httpapi, and never each other.
package actors
