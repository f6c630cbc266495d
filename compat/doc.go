// Package compat decides whether a new version of a pipeline can take over
// the state of a running one: the compatibility check that runs before an
// in-place update (`weir run --update`, `--validate-only`) and offline in
// `weir check`.
//
// The check is name-based. Every step of the running job's graph (OLD) is
// matched to the step of the new graph (NEW) with the same name, after the
// user's --transform-name-mapping is applied (see Mapping). It then compares
// what each matched step stores, as the graph records it (docs/ARCHITECTURE.md, "The
// graph is the contract" and "What a coder identity covers"): key coders,
// stored (accumulator or buffered element) coders, state and timer specs,
// the windowing strategy of a keyed step's input, side inputs, and source
// identities. Function bodies and configs are never compared: changing a
// DoFn or a CEL expression is allowed by design.
//
// Check never stops at the first problem: the Report lists every reason, in
// a deterministic order, each with a stable code from the registry below, a
// reason naming the step and, where one can be inferred, a concrete fix.
//
// # Codes
//
// Errors (the update is refused):
//
//	code                      when
//	STEP_MISSING              a keyed step of OLD (group_by_key, combine_per_key,
//	                          stateful_pardo) has no step of its name in NEW
//	STEP_KIND_CHANGED         a matched keyed or source step changed kind
//	KEY_CODER_CHANGED         a keyed step's key coder changed (for YAML: the
//	                          group_by fields or their types)
//	STATE_CODER_CHANGED       a combine's accumulator coder, or the coder of a
//	                          value, map or combining state cell changed
//	BUFFERED_ELEMENT_CHANGED  what a step buffers raw changed: the values of a
//	                          group_by_key (its stored and input coders) or
//	                          the elements of a bag state cell
//	STATE_SPEC_CHANGED        a state cell or timer family of OLD was removed
//	                          or changed kind (value, bag, map; timer domain)
//	WINDOW_FN_CHANGED         the window function type of a keyed step's input
//	                          changed (global, fixed, sliding, sessions)
//	TRIGGER_CHANGED           the trigger of a keyed step's input changed shape
//	                          (kinds or sub-triggers, not just a count or delay)
//	ACCUMULATION_CHANGED      the accumulation mode of a keyed step's input
//	                          changed (accumulating, discarding)
//	SIDE_INPUTS_CHANGED       a matched step gained or lost side inputs (by name)
//	SOURCE_CHANGED            a source of OLD reads something else in NEW, or
//	                          has no match (without AllowSourceChange)
//	COMBINE_OUTPUTS_REORDERED a YAML Combine's output moved to another
//	                          accumulator slot (NEW loaded without OLD's
//	                          slots): it would carry another output's values
//	COMBINE_RENAME_UNKNOWN    an output declares renamed_from a name the
//	                          running Combine has no output of
//	REKEY_FROM_MISMATCH       a Combine declares a re-key from other fields
//	                          than the running step's key fields
//	MAPPING_UNKNOWN_STEP      a mapping key names no step of OLD, or a mapping
//	                          value names no step of NEW
//	MAPPING_CONFLICT          two steps of OLD map to one step name of NEW
//
// Warnings (the update goes ahead):
//
//	code                      when
//	WINDOW_PARAMS_CHANGED     only numbers of a keyed step's input windowing
//	                          changed (size, period, gap, offset, allowed
//	                          lateness, a trigger's count or delay) or its
//	                          timestamp combiner: windows already buffered
//	                          keep their old boundaries
//	COMBINE_FN_CHANGED        a combine's function changed while its accumulator
//	                          coder did not: stored accumulators are handed to
//	                          the new function as they are; or a windowed Beam
//	                          Combine's count of a field became Beam's count of
//	                          elements (graphs stored before window and pane
//	                          became metadata): the stored counter carries on
//	COMBINE_OUTPUT_RENAMED    a YAML Combine output has another name at the same
//	                          position, undeclared: its accumulator carries on
//	                          under the new name (declare renamed_from)
//	STATE_REKEYED             a YAML Combine declares a re-key from the running
//	                          step's key fields (its group_by or their values
//	                          change): every stored key moves to its new key,
//	                          accumulators that meet there merge
//	COMBINE_OUTPUT_WIDENED    a YAML Combine output's value field widened from
//	                          int to float under sum, min, max or mean: the
//	                          stored accumulators carry on, read as floats
//	COMBINE_OUTPUT_NARROWED   a YAML Combine output's value field narrowed from
//	                          float to int under sum, min, max or latest,
//	                          declared allow_lossy: the stored accumulators
//	                          carry on, truncated toward zero (undeclared:
//	                          STATE_CODER_CHANGED, naming the declaration)
//	ACCUMULATOR_MIGRATED      a Go SDK combine's accumulator type changed and
//	                          the step declares the migration from the stored
//	                          type (weir.MigrateAccumulator): stored
//	                          accumulators are read through it
//	STATE_MIGRATED            a Go SDK StatefulParDo's value or bag cell
//	                          changed type and the step declares the
//	                          migration from the stored type
//	                          (weir.MigrateState): stored values are read
//	                          through it
//	COMBINE_OUTPUTS_CHANGED   a YAML Combine gained outputs (new slots: they
//	                          start empty in open windows) or lost some (the
//	                          last slots dropped, others retired); the other
//	                          outputs' accumulators carry on
//	STORED_WINDOW_FIELDS_DROPPED
//	                          the rows a keyed step stores (a Join's input
//	                          rows) lost only window_start, window_end and pane
//	                          fields, now element metadata (graphs stored
//	                          before that change): stored rows are read
//	                          without them; see window_meta.go
//	SOURCE_POSITIONS_DROPPED  a source changed or disappeared under
//	                          AllowSourceChange, or was mapped to "": its read
//	                          positions are dropped
//	STATE_DROPPED             a keyed step was mapped to "": its state is dropped
//
// Codes are part of weir's contract: clients and tests match on them, so
// they are never renamed or reused. They are registered, with their kinds
// (errors conflict or invalid, warnings warning), in package errcode.
//
// # Dependencies
//
// It may import graph, window, mtime, errcode and the standard library. It
// knows nothing of YAML, the SDK, the runner or the job service; front ends
// build graphs and hand them in.
package compat
