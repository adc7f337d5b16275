module libquant

go 1.26.8

require (
	github.com/ebitengine/purego v0.11.3
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
