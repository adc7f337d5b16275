package main

import _ "libquant/plugins/identity" // format "identity" (spec §8.4)
