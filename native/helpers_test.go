package native

// native's tests allocate CPU tensors.
import _ "libquant/host/cpumem"
