// Package archtest holds tests of the module's shape: which packages may
// import which, and how large the git packages' files may grow. It has no
// code of its own.
package archtest
