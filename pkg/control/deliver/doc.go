// Package deliver turns one event of a job's stream into a message a
// product may receive, and sends it once to a webhook: what the control
// plane's output worker (package control) does per event and destination.
//
// Filter makes the text safe to deliver, in this order: invalid UTF-8
// replaced; terminal control sequences removed (ANSI CSI and OSC escapes,
// DCS/APC strings, C0 and C1 controls but tab and newline, bidirectional
// overrides), a lone carriage return read as a newline; every value the
// template scanner would refuse to freeze replaced by "[REDACTED rule]"
// (scan.Redact); truncation by lines and by bytes (the whole cleaned text
// is returned beside, for an artifact the message links to); and the
// destination's markup escaped: &, < and > as entities (so <!channel>,
// <@U123> and <url|text> arrive as text) and a zero-width space after an
// @ that starts a word (so @channel, @here and @alice mention nobody).
//
// Post sends one attempt: the JSON body, an Idempotency-Key header (Key:
// job, event sequence, destination; the same on every attempt) and a
// Stripe-style signature header, Slipway-Signature: t=<unix>,v1=<hex
// HMAC-SHA256 of "t.body">, which Verify checks on the receiving side. Its
// Outcome says whether the destination took the message (with the id it
// returned), whether to retry and when (Retry-After honoured), or that the
// refusal is final.
//
// It is not the worker: it stores nothing, keeps no rate or retry state
// and never chooses a destination; package control does, from the
// tenant's configuration only.
package deliver
