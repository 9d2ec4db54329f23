#ifndef MIRROR_CCURL_SHIM_H
#define MIRROR_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt() and curl_easy_getinfo() are C variadic functions, which Swift cannot call.
   These typed wrappers pass exactly one argument of the type each option documents
   (long, pointer, curl_off_t or callback), so the ABI matches what libcurl reads with va_arg. */

static inline CURLcode mirror_curl_easy_setopt_long(CURL *h, CURLoption o, long v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode mirror_curl_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode mirror_curl_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) {
    return curl_easy_setopt(h, o, v);
}
typedef size_t (*mirror_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
static inline CURLcode mirror_curl_easy_setopt_data_callback(CURL *h, CURLoption o, mirror_curl_data_callback v) {
    return curl_easy_setopt(h, o, v);
}
typedef int (*mirror_curl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                             curl_off_t ultotal, curl_off_t ulnow);
static inline CURLcode mirror_curl_easy_setopt_xferinfo_callback(CURL *h, mirror_curl_xferinfo_callback v) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, v);
}
static inline CURLcode mirror_curl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode mirror_curl_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLMcode mirror_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) {
    return curl_multi_setopt(m, o, v);
}
/* CURLMsg.data is a union; Swift imports it, but naming the field here keeps call sites plain. */
static inline CURLcode mirror_curl_msg_result(const CURLMsg *msg) { return msg->data.result; }
#endif
