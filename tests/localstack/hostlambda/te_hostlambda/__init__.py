"""A LocalStack Lambda executor that runs functions as host processes: a test fixture.

LocalStack runs each Lambda function in a Docker container; where there is no Docker, this
plugin (``LAMBDA_RUNTIME_EXECUTOR=host``) runs it as a process under the Python its runtime
names, speaking the Lambda Runtime API as AWS does. It lives under tests/ and is installed
only into the LocalStack venv (``make localstack``), never into a deployment package.

- :mod:`.runtime_api`: the Runtime API server of one environment;
- :mod:`.bootstrap`: the runtime in the function's process (the Runtime API client);
- :mod:`.environment`: one environment's process, invocations, timeouts and logs;
- :mod:`.runtimes`: the Python for a runtime, and the runtime's own packages (boto3);
- :mod:`.executor` and :mod:`.plugin`: LocalStack's interface (these import LocalStack;
  the modules above need only the standard library and are tested without it).
"""
