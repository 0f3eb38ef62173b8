// Package apitypes is drover's HTTP API: its prefix, headers and the bodies
// of its requests and replies. The runner wire is package protocol; the
// rules both keep are in package rules.
package apitypes
