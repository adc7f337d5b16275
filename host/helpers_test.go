package host_test

// host's tests quantize with every built-in format.
import _ "libquant/plugins/all"
