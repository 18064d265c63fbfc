// Project stand-in for CANN's closed error-message header (base/err_msg.h)
// that opbase's log/log.h -- the logging the ops-nn operators use -- includes
// for its error-report macros. The log records themselves go through
// CheckLogLevel / DlogRecord, which log/log.h declares.
#ifndef BNB_API_CHECK_ERR_MSG_H
#define BNB_API_CHECK_ERR_MSG_H
#define REPORT_INNER_ERR_MSG(code, ...) ((void)(code))
#define REPORT_PREDEFINED_ERR_MSG(code, keys, values) ((void)(code), (void)(keys), (void)(values))
#endif
