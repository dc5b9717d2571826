package domain

import "time"

// Delivered is a message as the simulated network delivered it (GET /api/dev/sim/messages).
type Delivered struct {
	ID           string    `json:"id"`
	From         string    `json:"from"`
	To           string    `json:"to"`
	Type         string    `json:"type"`
	Text         string    `json:"text,omitempty"`
	Caption      string    `json:"caption,omitempty"`
	FileName     string    `json:"fileName,omitempty"`
	MimeType     string    `json:"mimeType,omitempty"`
	Bytes        int       `json:"bytes,omitempty"`
	Lat          float64   `json:"lat,omitempty"`
	Lng          float64   `json:"lng,omitempty"`
	Address      string    `json:"address,omitempty"`
	ContactName  string    `json:"contactName,omitempty"`
	ContactPhone string    `json:"contactPhone,omitempty"`
	Timestamp    time.Time `json:"timestamp"`
}
