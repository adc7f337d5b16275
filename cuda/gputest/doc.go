// Package gputest holds only tests (exact_test.go says what they check): the
// CUDA plugin's bytes against the CPU kernels'. They import host, host/hosttest,
// native (to load the plugin) and the plugins.
package gputest
