//! Pure rules for a connection's start and windows, with no I/O: the state machine of Careful
//! Resume (RFC 9959: jump to half a saved window, checked against the saved RTT, retreat on
//! loss; `careful_resume`) and the receive window sized for the path (`receive_window`). The
//! transport glues them to quinn's controllers and to sockets.

#![forbid(unsafe_code)]

pub mod careful_resume;
pub mod receive_window;
