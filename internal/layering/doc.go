// Package layering holds no code: its test reads every package of the
// module and checks that the package's doc lists the package's allowed
// imports and that the package imports nothing else (see layering_test.go for the
// form of that sentence).
//
// It may import only the standard library.
package layering
