package domain

// StoreEventPending is the status of a store event in the inbox, not processed yet (or waiting
// for a retry).
const StoreEventPending = "pending"
