package linear_test

// linear's tests run layers with every built-in format.
import _ "libquant/plugins/all"
