// Package rules holds the rules drover's runner wire (protocol), its HTTP
// API (apitypes), the CLI and the agent tools share: what plain text and
// well-formed JSON are, the label rule, the container image rule, names,
// hub and base URLs, context files, the limits on what agents and people
// send, and the error codes. It imports nothing of drover's but job.
package rules
