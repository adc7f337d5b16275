package rpc

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ManifestEnv names a file of the executable plugins a user allows, one per
// line as sha256sum writes them: "<64 hex digits>  <path>". A relative path
// is taken relative to the manifest's folder or to the working folder (a line
// matches when either names the plugin). quant_plugin_load and
// LIBQUANT_PLUGIN_PATH run an executable plugin only when a line gives its
// SHA-256 (or the load options do), and go-plugin's SecureConfig checks it.
const ManifestEnv = "LIBQUANT_PLUGIN_MANIFEST"

// realPath is path made absolute with symlinks resolved.
func realPath(path string) string {
	r := path
	if abs, err := filepath.Abs(path); err == nil {
		r = abs
	}
	if e, err := filepath.EvalSymlinks(r); err == nil {
		r = e
	}
	return r
}

// manifestDigest looks the plugin up in the manifest: the digest, or "" when
// no manifest is set or it does not list the plugin.
func manifestDigest(name, real string) (string, error) {
	if name == "" {
		name = os.Getenv(ManifestEnv)
	}
	if name == "" {
		return "", nil
	}
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %v", ManifestEnv, name, err)
	}
	defer f.Close()
	dir := filepath.Dir(name)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		digest, file, ok := strings.Cut(text, " ")
		file = strings.TrimPrefix(strings.TrimSpace(file), "*")
		if !ok || file == "" {
			return "", fmt.Errorf("%s=%s line %d: want \"<sha256 hex>  <path>\"", ManifestEnv, name, line)
		}
		cands := []string{file}
		if !filepath.IsAbs(file) {
			cands = append(cands, filepath.Join(dir, file))
		}
		for _, c := range cands {
			if realPath(c) == real {
				return digest, nil
			}
		}
	}
	return "", sc.Err()
}

// fileDigest is the hex SHA-256 of a file.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
