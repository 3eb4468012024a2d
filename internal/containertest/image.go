package containertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// ImageEnv names the environment variable that selects the Redis image. Set
// it (for example to "redis:7") where a registry is reachable, or where the
// host has no redis-server to build the local image from.
const ImageEnv = "REDLOCK_REDIS_IMAGE"

// LocalImage is the tag of the image that [Image] builds from the host's
// redis-server. It is fixed so that the image is built once per machine and
// then found by every later test binary; a label records a digest of its
// files, so a changed host binary is noticed and the image rebuilt.
const LocalImage = "redlock-redis:local"

// rootfsLabel holds the digest of the files copied into [LocalImage].
const rootfsLabel = Label + ".rootfs-sha256"

var (
	imageMu   sync.Mutex
	imageDone bool
	imageName string
	imageErr  error
)

// Image returns the Redis image to run: $REDLOCK_REDIS_IMAGE if set, else
// [LocalImage], which it builds from the host's redis-server if the engine
// does not have it yet (or has a stale one). The outcome is remembered for
// the life of the process, except a failure caused by ctx ending, so that
// one test's cancelled context does not fail the tests after it.
//
// The image is built rather than pulled because the machines this suite must
// run on reach no registry.
func Image(ctx context.Context) (string, error) {
	if img := os.Getenv(ImageEnv); img != "" {
		return img, nil
	}

	imageMu.Lock()
	defer imageMu.Unlock()
	if imageDone {
		return imageName, imageErr
	}
	imageName, imageErr = ensureLocalImage(ctx)
	if imageErr == nil || ctx.Err() == nil {
		imageDone = true
	}
	return imageName, imageErr
}

// rootFile is one file of the image's root filesystem.
type rootFile struct {
	dst  string // absolute path inside the image
	data []byte
	mode os.FileMode
}

// ensureLocalImage creates [LocalImage] unless the engine has it with the
// same file digest.
func ensureLocalImage(ctx context.Context) (string, error) {
	files, err := collectRootfs(ctx)
	if err != nil {
		return "", fmt.Errorf("containertest: collect the host's redis-server (or set %s, e.g. to redis:7): %w", ImageEnv, err)
	}
	digest := digestFiles(files)

	err = withDocker(ctx, func(cli *client.Client) error {
		res, err := cli.ImageInspect(ctx, LocalImage)
		switch {
		case err == nil:
			if res.Config != nil && res.Config.Labels[rootfsLabel] == digest {
				return nil
			}
		case !cerrdefs.IsNotFound(err):
			return fmt.Errorf("inspect %s: %w", LocalImage, err)
		}
		return buildImage(ctx, cli, files, digest)
	})
	if err != nil {
		return "", fmt.Errorf("containertest: image %s: %w", LocalImage, err)
	}
	return LocalImage, nil
}

// collectRootfs gathers redis-server, redis-cli if installed, every shared
// library they load and the dynamic loader, each at the path where the
// loader will look for it. Debian installs /usr/bin/redis-server as a
// symlink to redis-check-rdb and Redis picks its mode from argv[0], so the
// real file is copied under the name redis-server.
func collectRootfs(ctx context.Context) ([]rootFile, error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	bins := map[string]string{"/usr/bin/redis-server": server}
	if cli, err := exec.LookPath("redis-cli"); err == nil {
		bins["/usr/bin/redis-cli"] = cli
	}

	srcs := make(map[string]string) // image path -> host path
	for dst, src := range bins {
		srcs[dst] = src
		libs, err := sharedLibraries(ctx, src)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			srcs[lib] = lib
		}
	}

	files := make([]rootFile, 0, len(srcs))
	for dst, src := range srcs {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return nil, err
		}
		info, err := os.Stat(real)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return nil, err
		}
		files = append(files, rootFile{dst: dst, data: data, mode: info.Mode().Perm()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].dst < files[j].dst })
	return files, nil
}

// sharedLibraries returns the absolute paths of the libraries, and the
// loader, that ldd reports for the binary at bin.
func sharedLibraries(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil // static binary
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, out)
	}
	var libs []string
	for line := range strings.Lines(string(out)) {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)",
		// "/lib64/ld-linux-x86-64.so.2 (0x...)" or "linux-vdso.so.1 (0x...)".
		line = strings.TrimSpace(line)
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		if strings.HasPrefix(line, "not found") {
			return nil, fmt.Errorf("ldd %s: a library is missing: %s", bin, out)
		}
		p, _, _ := strings.Cut(line, " ")
		if path.IsAbs(p) {
			libs = append(libs, p)
		}
	}
	return libs, nil
}

// digestFiles identifies a root filesystem by its paths, modes and contents.
func digestFiles(files []rootFile) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", f.dst, f.mode, len(f.data))
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// buildImage imports the root filesystem as a one-layer image (docker
// import) with the settings a Dockerfile would give it. Nothing comes from a
// registry. An import is a single step, where the classic builder would
// commit one image per Dockerfile instruction, which is slow on the
// fuse-overlayfs storage of the machines this runs on.
func buildImage(ctx context.Context, cli *client.Client, files []rootFile, digest string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.dst[1:], Mode: int64(f.mode), Size: int64(len(f.data)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}

	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, LocalImage, client.ImageImportOptions{
		Changes: []string{
			`ENTRYPOINT ["/usr/bin/redis-server"]`,
			`ENV PATH=/usr/local/bin:/usr/bin:/bin`,
			`EXPOSE 6379`,
			fmt.Sprintf("LABEL %s=true %s=%s", Label, rootfsLabel, digest),
		},
		Message: "redis-server of the host, for " + Label,
	})
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer func() { _ = res.Close() }()
	return readProgress(res)
}

// readProgress drains the engine's JSON progress stream. A failed import
// may still answer 200 OK; the failure is then only in the stream.
func readProgress(r io.Reader) error {
	var log strings.Builder
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read progress: %w", err)
		}
		log.WriteString(msg.Stream + msg.Status)
		if msg.ErrorDetail != nil && msg.Error == "" {
			msg.Error = msg.ErrorDetail.Message
		}
		if msg.Error != "" {
			return fmt.Errorf("%s\n%s", msg.Error, log.String())
		}
	}
}
