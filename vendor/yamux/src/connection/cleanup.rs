use crate::connection::commands;
use crate::ConnectionError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A [`Future`] that cleans up resources in case of an error.
#[must_use]
pub struct Cleanup {
    state: State,
    commands: commands::Receiver,
    error: Option<ConnectionError>,
}

impl Cleanup {
    pub(crate) fn new(
        commands: commands::Receiver,
        error: ConnectionError,
    ) -> Self {
        Self {
            state: State::ClosingStreamReceiver,
            commands,
            error: Some(error),
        }
    }
}

impl Future for Cleanup {
    type Output = ConnectionError;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();

        loop {
            match this.state {
                State::ClosingStreamReceiver => {
                    this.commands.close();
                    this.state = State::DrainingStreamReceiver;
                }
                State::DrainingStreamReceiver => match this.commands.try_next() {
                    Some(cmd) => {
                        drop(cmd);
                    }
                    None => {
                        return Poll::Ready(
                            this.error
                                .take()
                                .expect("to not be called after completion"),
                        )
                    }
                },
            }
        }
    }
}

#[allow(clippy::enum_variant_names)]
enum State {
    ClosingStreamReceiver,
    DrainingStreamReceiver,
}
