package engine

import "github.com/gateway/gateway/domain"

// The domain errors, re-exported for the HTTP layer: they are declared once, in domain.
var (
	ErrUnknownKey        = domain.ErrUnknownKey
	ErrKeyRevoked        = domain.ErrKeyRevoked
	ErrKeyExpired        = domain.ErrKeyExpired
	ErrInsufficientScope = domain.ErrInsufficientScope
	ErrRateLimited       = domain.ErrRateLimited
	ErrQuotaExceeded     = domain.ErrQuotaExceeded
	ErrUnavailable       = domain.ErrUnavailable
	ErrUserNotFound      = domain.ErrUserNotFound
	ErrKeyNotFound       = domain.ErrKeyNotFound
	ErrSessionNotFound   = domain.ErrSessionNotFound
	ErrAlreadyExists     = domain.ErrAlreadyExists
	ErrValidation        = domain.ErrValidation
	ErrForbidden         = domain.ErrForbidden
)
