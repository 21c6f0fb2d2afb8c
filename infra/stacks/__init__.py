"""CDK constructs and the stack that deploy Task Executor to AWS."""
