// Package nexmarkrow gives the Nexmark source (package nexmark) to YAML
// pipelines as rows: Source wraps a nexmark.Source so that every event it
// reads is a row of EventSchema, with Beam's Event fields newPerson,
// newAuction and bid (exactly one of them non-null) and eventType, which
// says which. Package yamlpipe reads `type: Nexmark`'s config into a
// nexmark.Config.
//
// It may import nexmark, row, runner/contract and the standard library.
package nexmarkrow
