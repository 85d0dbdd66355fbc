//! The EtherTypes (IEEE 802 numbers) that the decoder, the capture filters
//! and live capture look at.

pub const IPV4: u16 = 0x0800;
pub const IPV6: u16 = 0x86DD;
/// 802.1Q VLAN tag.
pub const VLAN: u16 = 0x8100;
/// 802.1ad (QinQ) service tag.
pub const QINQ: u16 = 0x88A8;
/// The pre-standard QinQ tag.
pub const QINQ_OLD: u16 = 0x9100;
/// Every tag protocol identifier a VLAN tag is recognised by.
pub const VLAN_TPIDS: [u16; 3] = [VLAN, QINQ, QINQ_OLD];
