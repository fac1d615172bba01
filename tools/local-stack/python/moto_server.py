"""moto's server on 127.0.0.1 only, as the local Step Functions and S3.

Step Functions runs executions (moto's state-machine interpreter), and each
`arn:aws:states:::lambda:invoke` task calls the local Lambda Invoke API given
with --lambda-endpoint instead of moto's own Lambda. A function error there
(`X-Amz-Function-Error: Unhandled`, body `{"errorType", "errorMessage"}`)
fails the task with the error named by `errorType` and the body as its cause,
so `Retry` and `Catch` match as on AWS. An execution started without a name
is named with a UUID, as Step Functions names it. An execution of a state
machine with tracing enabled (`tracingConfiguration`) is one X-Ray trace: each
Lambda task sends `X-Amzn-Trace-Id` with the execution's trace, as Step
Functions does.

Run with the pinned moto's Python (see tools/local-stack/src/tools.rs):

    python moto_server.py --port PORT --lambda-endpoint http://127.0.0.1:PORT
"""

import argparse
import os
import sys

# Step Functions waits for a Lambda task as long as the task's timeout; the
# local Invoke API may also queue an invocation until an environment is free.
LAMBDA_READ_TIMEOUT_S = 3600
LAMBDA_CONNECT_TIMEOUT_S = 10


def lambda_client_for(endpoint, trace):
    """A `boto_client_for` whose Lambda clients call `endpoint`, each call
    with the trace header `trace.header` holds (if any)."""
    import boto3
    from botocore.config import Config
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import (
        lambda_eval_utils,
    )

    moto_client_for = lambda_eval_utils.boto_client_for

    def add_trace_header(request, **_):
        header = getattr(trace, "header", None)
        if header:
            request.headers["X-Amzn-Trace-Id"] = header

    def boto_client_for(region, service, state_credentials=None):
        if service != "lambda":
            return moto_client_for(
                region=region, service=service, state_credentials=state_credentials
            )
        client = boto3.client(
            "lambda",
            region_name=region,
            endpoint_url=endpoint,
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(
                parameter_validation=False,
                # Step Functions' Retry decides what is retried, not the SDK.
                retries={"total_max_attempts": 1},
                connect_timeout=LAMBDA_CONNECT_TIMEOUT_S,
                read_timeout=LAMBDA_READ_TIMEOUT_S,
            ),
        )
        client.meta.events.register("before-send.lambda.Invoke", add_trace_header)
        return client

    return lambda_eval_utils, boto_client_for


def execution_trace_header(execution_arn, start_time):
    """The X-Ray trace header of an execution: its own trace (the root's
    time part from its start), its segment as the parent, sampled."""
    import hashlib
    from datetime import datetime

    digest = hashlib.sha256(execution_arn.encode()).hexdigest()
    try:
        seconds = int(datetime.fromisoformat(str(start_time).replace("Z", "+00:00")).timestamp())
    except ValueError:
        seconds = 0
    return f"Root=1-{seconds:08x}-{digest[:24]};Parent={digest[24:40]};Sampled=1"


def with_execution_traces(module):
    """Each Lambda task of a traced state machine's execution calls with the
    execution's trace header (held per thread while the task calls)."""
    import threading

    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    trace = threading.local()
    integrate = module.execute_lambda_function_integration

    def traced(env, parameters, region, state_credentials):
        context = env.states.context_object.context_object_data
        execution, machine = context["Execution"], context["StateMachine"]
        arn = machine["Id"]
        account, machine_region = arn.split(":")[4], arn.split(":")[3]
        backend = stepfunctions_parser_backends[account][machine_region]
        tracing = backend.describe_state_machine(arn).tracingConfiguration or {}
        trace.header = (
            execution_trace_header(execution["Id"], execution.get("StartTime"))
            if tracing.get("enabled")
            else None
        )
        try:
            return integrate(
                env=env,
                parameters=parameters,
                region=region,
                state_credentials=state_credentials,
            )
        finally:
            trace.header = None

    module.execute_lambda_function_integration = traced
    return trace


def with_generated_execution_names():
    """moto's interpreter leaves an execution started without a name unnamed
    (its ARN ends in `None`, `$$.Execution.Name` is null, and a second one
    is refused as a duplicate); Step Functions names it with a UUID."""
    import uuid

    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    start_execution = StepFunctionsParserBackend.start_execution

    def start_named(self, state_machine_arn, name=None, *args, **kwargs):
        return start_execution(
            self, state_machine_arn, name or str(uuid.uuid4()), *args, **kwargs
        )

    StepFunctionsParserBackend.start_execution = start_named


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lambda-endpoint", required=True)
    args = parser.parse_args()
    if not args.lambda_endpoint.startswith("http://127.0.0.1:"):
        sys.exit("--lambda-endpoint must be http://127.0.0.1:PORT")
    # moto's own clients (other task integrations) call this server.
    os.environ["MOTO_PORT"] = str(args.port)

    from moto.core.config import default_user_config

    default_user_config["stepfunctions"] = {"execute_state_machine": True}
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import (
        lambda_eval_utils,
    )

    trace = with_execution_traces(lambda_eval_utils)
    module, boto_client_for = lambda_client_for(args.lambda_endpoint, trace)
    module.boto_client_for = boto_client_for
    with_generated_execution_names()

    from moto import server

    server.main(["--host", "127.0.0.1", "--port", str(args.port)])


if __name__ == "__main__":
    main()
