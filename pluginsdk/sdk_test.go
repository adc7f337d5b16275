package pluginsdk

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHandshakeVersion(t *testing.T) {
	require.Equal(t, fmt.Sprint(ProtocolVersion), handshakeVersion)
}
