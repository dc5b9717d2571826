// Package actors holds the gateway's actor kinds, one per file with its messages beside it:
// key (an API key and its daily rate limiter), and later session, account, campaign and
// storeevents. Actors own their state; they persist snapshots through interfaces declared here
// and implemented by persist. Imports: persist, network, ecom; never engine or httpapi.
package actors
