package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// builder is a builder stage in the form of the repository's Dockerfile.
const builder = `# syntax=docker/dockerfile:1
#
# A comment.

FROM golang:1.26 AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
ARG VERSION=dev
ARG REVISION=unknown
RUN LDFLAGS="-s -w -X example.com/v.Version=${VERSION} -X example.com/v.Revision=$REVISION" && \
    # a comment inside the continuation, which Docker drops
    CGO_ENABLED=0 go build -trimpath -ldflags="${LDFLAGS}" -o /out/a ./cmd/a && \
    CGO_ENABLED=0 go build -trimpath -ldflags="${LDFLAGS}" -o /out/b ./cmd/b
`

const final = `
FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://example.com/x"
COPY --from=builder /out/a /out/b /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/a"]
`

func TestInterpret(t *testing.T) {
	ldflags := func(version, revision string) string {
		return "-ldflags=-s -w -X example.com/v.Version=" + version + " -X example.com/v.Revision=" + revision
	}
	build := func(out, pkg, version, revision string) goBuild {
		return goBuild{
			stage: "builder", at: "Dockerfile:11", env: []string{"CGO_ENABLED=0"},
			args: []string{"-trimpath", ldflags(version, revision), "-o", out, pkg}, out: out,
		}
	}
	copies := []copied{
		{stage: "builder", at: "Dockerfile:20", src: "/out/a", dest: "/usr/local/bin/a"},
		{stage: "builder", at: "Dockerfile:20", src: "/out/b", dest: "/usr/local/bin/b"},
	}
	config := func(version string) v1.Config {
		return v1.Config{
			Env:        []string{defaultPath},
			User:       "65532:65532",
			Entrypoint: []string{"/usr/local/bin/a"},
			Labels: map[string]string{
				"org.opencontainers.image.version": version,
				"org.opencontainers.image.source":  "https://example.com/x",
			},
		}
	}
	history := "COPY --from=builder /out/a /out/b /usr/local/bin/"

	tests := []struct {
		name       string
		dockerfile string
		buildArgs  map[string]string
		want       *recipe
		wantErr    string
	}{{
		name:       "defaults of the ARGs",
		dockerfile: builder + final,
		want: &recipe{
			builds:  []goBuild{build("/out/a", "./cmd/a", "dev", "unknown"), build("/out/b", "./cmd/b", "dev", "unknown")},
			copies:  copies,
			config:  config("dev"),
			history: history,
		},
	}, {
		name:       "build arguments override the defaults in every stage",
		dockerfile: builder + final,
		buildArgs:  map[string]string{"VERSION": "v1.2.3", "REVISION": "abc"},
		want: &recipe{
			builds:  []goBuild{build("/out/a", "./cmd/a", "v1.2.3", "abc"), build("/out/b", "./cmd/b", "v1.2.3", "abc")},
			copies:  copies,
			config:  config("v1.2.3"),
			history: history,
		},
	}, {
		name: "an ARG without a default takes the global one; single quotes do not expand",
		dockerfile: "ARG IMG=x\nFROM golang AS build\nRUN go build -o=/out/x '-ldflags=$IMG' .\n" +
			"FROM scratch\nARG IMG\nLABEL \"a\"=$IMG b='$IMG' c=${IMG}y\nCOPY --from=build /out/x /x\nENTRYPOINT [\"/x\"]\n",
		want: &recipe{
			builds:  []goBuild{{stage: "build", at: "Dockerfile:3", args: []string{"-o=/out/x", "-ldflags=$IMG", "."}, out: "/out/x"}},
			copies:  []copied{{stage: "build", at: "Dockerfile:7", src: "/out/x", dest: "/x"}},
			config:  v1.Config{Env: []string{defaultPath}, Entrypoint: []string{"/x"}, Labels: map[string]string{"a": "x", "b": "$IMG", "c": "xy"}},
			history: "COPY --from=build /out/x /x",
		},
	}, {
		name:       "an instruction the final stage does not support",
		dockerfile: builder + final + "RUN echo hi\n",
		wantErr:    "Dockerfile:23: RUN: not supported in the final stage",
	}, {
		name:       "ENV in the final stage",
		dockerfile: builder + strings.Replace(final, "USER", "ENV A=b\nUSER", 1),
		wantErr:    "Dockerfile:21: ENV: not supported in the final stage",
	}, {
		name:       "a base other than scratch",
		dockerfile: builder + strings.Replace(final, "FROM scratch", "FROM gcr.io/distroless/static-debian12:nonroot", 1),
		wantErr:    "Dockerfile:16: FROM: the final stage is FROM gcr.io/distroless/static-debian12:nonroot",
	}, {
		name:       "COPY of a file not built",
		dockerfile: builder + strings.Replace(final, "/out/b ", "/out/b /out/c ", 1),
		wantErr:    "Dockerfile:20: COPY --from=builder /out/c: no go build in stage builder writes it",
	}, {
		name:       "a built file not copied",
		dockerfile: builder + strings.Replace(final, "/out/b ", "", 1),
		wantErr:    "Dockerfile:11: go build -o /out/b: the final stage does not copy it",
	}, {
		name:       "COPY from a stage that does not exist",
		dockerfile: builder + strings.Replace(final, "--from=builder", "--from=other", 1),
		wantErr:    "COPY --from=other: no earlier stage is named other",
	}, {
		name:       "COPY from the build context",
		dockerfile: builder + final + "COPY LICENSE /\n",
		wantErr:    "Dockerfile:23: COPY: only COPY --from=STAGE is supported",
	}, {
		name:       "COPY --chmod",
		dockerfile: builder + strings.Replace(final, "--from=builder", "--from=builder --chmod=0700", 1),
		wantErr:    "--chmod=0700 is not supported",
	}, {
		name:       "several sources into a file",
		dockerfile: builder + strings.Replace(final, "/usr/local/bin/\n", "/usr/local/bin\n", 1),
		wantErr:    "Dockerfile:20: COPY: with several sources DEST must end in /",
	}, {
		name:       "ENTRYPOINT in shell form",
		dockerfile: builder + strings.Replace(final, `["/usr/local/bin/a"]`, "/usr/local/bin/a", 1),
		wantErr:    "Dockerfile:22: ENTRYPOINT: want the exec form",
	}, {
		name:       "a LABEL without a value",
		dockerfile: builder + final + "LABEL x\n",
		wantErr:    `Dockerfile:23: LABEL: want KEY=VALUE, got "x"`,
	}, {
		name:       "a variable no ARG declares",
		dockerfile: builder + final + "LABEL x=$REVISION\n",
		wantErr:    "Dockerfile:23: LABEL: $REVISION is not declared",
	}, {
		name:       "an unquoted variable with blanks in a RUN",
		dockerfile: strings.Replace(builder, `-ldflags="${LDFLAGS}" -o /out/a`, `-ldflags=${LDFLAGS} -o /out/a`, 1) + final,
		wantErr:    "Dockerfile:11: RUN: an unquoted variable with blanks",
	}, {
		name:       "a pipe in a RUN that builds",
		dockerfile: strings.Replace(builder, "./cmd/b\n", "./cmd/b | tee log\n", 1) + final,
		wantErr:    `Dockerfile:11: RUN: shell syntax '|' is not supported`,
	}, {
		name:       "go build without -o",
		dockerfile: strings.Replace(builder, "-o /out/b ", "", 1) + final,
		wantErr:    "Dockerfile:11: RUN: go build: want one -o /DIR/NAME",
	}, {
		name:       "ENV in the builder stage",
		dockerfile: strings.Replace(builder, "WORKDIR /src", "ENV GOFLAGS=-mod=vendor", 1) + final,
		wantErr:    "Dockerfile:6: ENV: not supported in stage builder",
	}, {
		name:       "a line continuation at the end",
		dockerfile: builder + final + "LABEL a=b \\\n",
		wantErr:    "Dockerfile:23: LABEL: the last line ends in a line continuation",
	}, {
		name:       "an escape directive",
		dockerfile: "# escape=`\n" + builder + final,
		wantErr:    "Dockerfile:1: only the escape character \\ is supported",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := interpret("Dockerfile", []byte(tt.dockerfile), tt.buildArgs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(recipe{}, goBuild{}, copied{})); d != "" {
				t.Errorf("recipe (-want +got):\n%s", d)
			}
		})
	}
}

// FuzzInterpret checks that no Dockerfile makes interpret panic.
func FuzzInterpret(f *testing.F) {
	real, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(real))
	f.Add(builder + final)
	f.Add("FROM scratch\nLABEL a=\"${\" b='\nRUN x=\"$(\" \\\n")
	f.Fuzz(func(t *testing.T, dockerfile string) {
		_, _ = interpret("Dockerfile", []byte(dockerfile), map[string]string{"VERSION": "v1"})
	})
}
