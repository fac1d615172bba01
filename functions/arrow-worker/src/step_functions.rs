//! The report state machine on Step Functions: a day too large for one
//! invocation is handed to it (see `report.rs`).

use crate::store::FanOutError;
use aws_sdk_sfn::Client;
use shared::ErrorChain;

/// Starts executions of one state machine.
#[derive(Debug, Clone)]
pub struct FanOuts {
    client: Client,
    state_machine_arn: String,
}

impl FanOuts {
    /// Executions of `state_machine_arn`, started through `client` (built
    /// once, at cold start).
    pub fn new(client: Client, state_machine_arn: impl Into<String>) -> Self {
        Self {
            client,
            state_machine_arn: state_machine_arn.into(),
        }
    }

    /// Start the execution `name` with `input`. A name already taken is no
    /// error: Step Functions keeps a standard execution's name for 90 days,
    /// so a retry of the run that started it finds it there.
    pub async fn start(&self, name: &str, input: String) -> Result<(), FanOutError> {
        let started = self
            .client
            .start_execution()
            .state_machine_arn(&self.state_machine_arn)
            .name(name)
            .input(input)
            .send()
            .await;
        match started {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_execution_already_exists()) =>
            {
                tracing::info!(execution = name, "fan-out already started");
                Ok(())
            }
            Err(e) => Err(FanOutError(format!(
                "StartExecution {name} of {}: {}",
                self.state_machine_arn,
                ErrorChain(&e)
            ))),
        }
    }
}
