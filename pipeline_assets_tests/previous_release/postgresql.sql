--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: daily_revenue; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.daily_revenue (
    day character varying(10) NOT NULL,
    orders bigint NOT NULL,
    revenue text NOT NULL
);


--
-- Name: orders; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.orders (
    order_id bigint NOT NULL,
    status text NOT NULL,
    amount text NOT NULL,
    updated_at character varying(32) NOT NULL
);


--
-- Name: pipeline_batches; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pipeline_batches (
    id integer NOT NULL,
    batch_id character varying(64) NOT NULL,
    kind character varying(16) NOT NULL,
    window_start character varying(32),
    window_end character varying(32),
    rows_read bigint NOT NULL,
    inserted bigint NOT NULL,
    updated bigint NOT NULL,
    unchanged bigint NOT NULL,
    watermark_before character varying(32),
    watermark_after character varying(32),
    committed_at character varying(32) NOT NULL,
    days_touched text NOT NULL,
    rows_deleted bigint,
    deleted_digest character varying(64),
    mass_delete_allowed boolean
);


--
-- Name: pipeline_batches_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.pipeline_batches_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: pipeline_batches_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.pipeline_batches_id_seq OWNED BY public.pipeline_batches.id;


--
-- Name: pipeline_watermark; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pipeline_watermark (
    name character varying(64) NOT NULL,
    value character varying(32),
    lock_holder character varying(128)
);


--
-- Name: pipeline_watermark_history; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pipeline_watermark_history (
    id integer NOT NULL,
    changed_at character varying(32) NOT NULL,
    kind character varying(16) NOT NULL,
    old_value character varying(32),
    new_value character varying(32),
    reason text,
    batch_id character varying(64)
);


--
-- Name: pipeline_watermark_history_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.pipeline_watermark_history_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: pipeline_watermark_history_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.pipeline_watermark_history_id_seq OWNED BY public.pipeline_watermark_history.id;


--
-- Name: pipeline_batches id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pipeline_batches ALTER COLUMN id SET DEFAULT nextval('public.pipeline_batches_id_seq'::regclass);


--
-- Name: pipeline_watermark_history id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pipeline_watermark_history ALTER COLUMN id SET DEFAULT nextval('public.pipeline_watermark_history_id_seq'::regclass);


--
-- Data for Name: daily_revenue; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: orders; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.orders VALUES (101, 'paid', '40.00', '2025-12-27T00:00:00.000000+00:00');
INSERT INTO public.orders VALUES (102, 'paid', '15.50', '2026-01-01T00:00:00.000000+00:00');
INSERT INTO public.orders VALUES (103, 'refunded', '30.00', '2026-01-05T00:00:00.000000+00:00');
INSERT INTO public.orders VALUES (104, 'paid', '12.75', '2026-01-08T00:00:00.000000+00:00');
INSERT INTO public.orders VALUES (106, 'paid', '18.20', '2026-01-14T00:00:00.000000+00:00');
INSERT INTO public.orders VALUES (1001, 'paid', '12.40', '2026-01-08T08:52:44.000000+00:00');
INSERT INTO public.orders VALUES (1002, 'paid', '36.50', '2026-01-08T09:07:34.000000+00:00');
INSERT INTO public.orders VALUES (1003, 'paid', '60.55', '2026-01-08T09:24:46.000000+00:00');
INSERT INTO public.orders VALUES (1004, 'paid', '48.10', '2026-01-08T10:21:16.000000+00:00');
INSERT INTO public.orders VALUES (1005, 'paid', '28.49', '2026-01-08T11:01:42.000000+00:00');
INSERT INTO public.orders VALUES (1006, 'paid', '12.34', '2026-01-09T17:58:16.000000+00:00');
INSERT INTO public.orders VALUES (1007, 'paid', '31.75', '2026-01-08T11:44:57.000000+00:00');
INSERT INTO public.orders VALUES (1008, 'cancelled', '29.56', '2026-01-08T12:54:50.000000+00:00');
INSERT INTO public.orders VALUES (1009, 'paid', '26.70', '2026-01-08T13:16:19.000000+00:00');
INSERT INTO public.orders VALUES (1010, 'paid', '44.59', '2026-01-08T14:15:10.000000+00:00');
INSERT INTO public.orders VALUES (1011, 'paid', '40.32', '2026-01-08T14:22:29.000000+00:00');
INSERT INTO public.orders VALUES (1012, 'cancelled', '21.73', '2026-01-08T14:28:15.000000+00:00');
INSERT INTO public.orders VALUES (1013, 'paid', '18.95', '2026-01-08T15:36:42.000000+00:00');
INSERT INTO public.orders VALUES (1014, 'paid', '11.26', '2026-01-08T15:43:41.000000+00:00');
INSERT INTO public.orders VALUES (1015, 'paid', '22.30', '2026-01-08T16:06:45.000000+00:00');
INSERT INTO public.orders VALUES (1016, 'paid', '26.47', '2026-01-09T09:29:24.000000+00:00');
INSERT INTO public.orders VALUES (1017, 'paid', '23.21', '2026-01-08T17:14:15.000000+00:00');
INSERT INTO public.orders VALUES (1018, 'paid', '30.11', '2026-01-09T08:02:05.000000+00:00');
INSERT INTO public.orders VALUES (1019, 'paid', '30.82', '2026-01-10T10:39:07.000000+00:00');
INSERT INTO public.orders VALUES (1020, 'paid', '20.22', '2026-01-09T08:25:13.000000+00:00');
INSERT INTO public.orders VALUES (1021, 'paid', '30.89', '2026-01-09T08:31:39.000000+00:00');
INSERT INTO public.orders VALUES (1022, 'refunded', '52.41', '2026-01-12T14:03:11.000000+00:00');
INSERT INTO public.orders VALUES (1023, 'paid', '14.77', '2026-01-09T10:14:10.000000+00:00');
INSERT INTO public.orders VALUES (1024, 'refunded', '18.23', '2026-01-11T08:57:25.000000+00:00');
INSERT INTO public.orders VALUES (1025, 'paid', '44.04', '2026-01-09T11:33:09.000000+00:00');
INSERT INTO public.orders VALUES (1026, 'paid', '37.25', '2026-01-09T12:03:20.000000+00:00');
INSERT INTO public.orders VALUES (1027, 'refunded', '43.35', '2026-01-10T11:12:28.000000+00:00');
INSERT INTO public.orders VALUES (1028, 'paid', '42.06', '2026-01-09T13:25:35.000000+00:00');
INSERT INTO public.orders VALUES (1029, 'paid', '25.67', '2026-01-09T13:40:37.000000+00:00');
INSERT INTO public.orders VALUES (1030, 'paid', '33.36', '2026-01-09T13:48:00.000000+00:00');
INSERT INTO public.orders VALUES (1031, 'refunded', '66.88', '2026-01-10T16:33:27.000000+00:00');
INSERT INTO public.orders VALUES (1032, 'cancelled', '14.61', '2026-01-09T14:22:44.000000+00:00');
INSERT INTO public.orders VALUES (1033, 'paid', '19.73', '2026-01-09T14:50:56.000000+00:00');
INSERT INTO public.orders VALUES (1034, 'paid', '26.91', '2026-01-09T15:08:34.000000+00:00');
INSERT INTO public.orders VALUES (1035, 'paid', '27.60', '2026-01-08T11:05:41.000000+00:00');
INSERT INTO public.orders VALUES (1036, 'paid', '46.30', '2026-01-09T16:28:17.000000+00:00');
INSERT INTO public.orders VALUES (1037, 'cancelled', '16.80', '2026-01-09T17:46:07.000000+00:00');
INSERT INTO public.orders VALUES (1038, 'paid', '22.06', '2026-01-10T09:07:27.000000+00:00');
INSERT INTO public.orders VALUES (1039, 'paid', '27.52', '2026-01-10T09:09:12.000000+00:00');
INSERT INTO public.orders VALUES (1040, 'cancelled', '15.03', '2026-01-10T09:55:53.000000+00:00');
INSERT INTO public.orders VALUES (1041, 'paid', '18.81', '2026-01-10T10:32:05.000000+00:00');
INSERT INTO public.orders VALUES (1042, 'paid', '52.70', '2026-01-11T16:37:10.000000+00:00');
INSERT INTO public.orders VALUES (1043, 'paid', '17.69', '2026-01-10T12:35:04.000000+00:00');
INSERT INTO public.orders VALUES (1044, 'paid', '28.81', '2026-01-10T13:02:45.000000+00:00');
INSERT INTO public.orders VALUES (1045, 'paid', '79.04', '2026-01-10T16:20:26.000000+00:00');
INSERT INTO public.orders VALUES (1046, 'paid', '20.44', '2026-01-10T17:07:56.000000+00:00');
INSERT INTO public.orders VALUES (1047, 'paid', '18.25', '2026-01-10T17:31:29.000000+00:00');
INSERT INTO public.orders VALUES (1048, 'paid', '29.07', '2026-01-10T17:54:34.000000+00:00');
INSERT INTO public.orders VALUES (1049, 'paid', '27.79', '2026-01-11T10:29:47.000000+00:00');
INSERT INTO public.orders VALUES (1050, 'paid', '69.39', '2026-01-11T10:29:55.000000+00:00');
INSERT INTO public.orders VALUES (1051, 'paid', '27.20', '2026-01-11T11:33:48.000000+00:00');
INSERT INTO public.orders VALUES (1052, 'paid', '17.34', '2026-01-11T12:04:21.000000+00:00');
INSERT INTO public.orders VALUES (1053, 'paid', '25.97', '2026-01-11T12:42:28.000000+00:00');
INSERT INTO public.orders VALUES (1054, 'paid', '24.39', '2026-01-11T12:57:00.000000+00:00');
INSERT INTO public.orders VALUES (1055, 'paid', '44.83', '2026-01-12T09:36:44.000000+00:00');
INSERT INTO public.orders VALUES (1056, 'paid', '9.14', '2026-01-11T15:47:51.000000+00:00');
INSERT INTO public.orders VALUES (1057, 'paid', '30.06', '2026-01-11T16:20:59.000000+00:00');
INSERT INTO public.orders VALUES (1058, 'paid', '55.94', '2026-01-11T17:19:31.000000+00:00');
INSERT INTO public.orders VALUES (1059, 'paid', '64.07', '2026-01-10T08:37:37.000000+00:00');
INSERT INTO public.orders VALUES (1060, 'paid', '93.74', '2026-01-12T08:59:24.000000+00:00');
INSERT INTO public.orders VALUES (1061, 'refunded', '30.36', '2026-01-15T08:05:24.000000+00:00');
INSERT INTO public.orders VALUES (1062, 'paid', '29.78', '2026-01-12T10:12:54.000000+00:00');
INSERT INTO public.orders VALUES (1063, 'cancelled', '46.64', '2026-01-12T10:32:09.000000+00:00');
INSERT INTO public.orders VALUES (1064, 'cancelled', '28.73', '2026-01-12T10:37:08.000000+00:00');
INSERT INTO public.orders VALUES (1065, 'paid', '94.47', '2026-01-12T10:38:06.000000+00:00');
INSERT INTO public.orders VALUES (1066, 'paid', '23.72', '2026-01-12T10:56:20.000000+00:00');
INSERT INTO public.orders VALUES (1067, 'cancelled', '25.39', '2026-01-09T12:11:09.000000+00:00');
INSERT INTO public.orders VALUES (1068, 'paid', '49.21', '2026-01-12T12:14:17.000000+00:00');
INSERT INTO public.orders VALUES (1069, 'paid', '31.65', '2026-01-12T12:27:07.000000+00:00');
INSERT INTO public.orders VALUES (1070, 'paid', '36.48', '2026-01-12T12:52:34.000000+00:00');
INSERT INTO public.orders VALUES (1071, 'paid', '25.98', '2026-01-12T13:20:05.000000+00:00');
INSERT INTO public.orders VALUES (1072, 'paid', '41.72', '2026-01-12T14:19:01.000000+00:00');
INSERT INTO public.orders VALUES (1073, 'paid', '101.84', '2026-01-12T14:56:01.000000+00:00');
INSERT INTO public.orders VALUES (1074, 'paid', '84.75', '2026-01-12T15:05:27.000000+00:00');
INSERT INTO public.orders VALUES (1075, 'paid', '27.87', '2026-01-12T16:08:18.000000+00:00');
INSERT INTO public.orders VALUES (1076, 'paid', '35.55', '2026-01-12T17:09:22.000000+00:00');
INSERT INTO public.orders VALUES (1077, 'paid', '24.87', '2026-01-13T10:32:36.000000+00:00');
INSERT INTO public.orders VALUES (1078, 'paid', '46.61', '2026-01-12T17:40:05.000000+00:00');
INSERT INTO public.orders VALUES (1079, 'paid', '30.89', '2026-01-13T08:13:37.000000+00:00');
INSERT INTO public.orders VALUES (1080, 'paid', '159.15', '2026-01-14T08:12:48.000000+00:00');
INSERT INTO public.orders VALUES (1081, 'paid', '17.93', '2026-01-13T10:19:03.000000+00:00');
INSERT INTO public.orders VALUES (1082, 'paid', '22.52', '2026-01-13T10:42:39.000000+00:00');
INSERT INTO public.orders VALUES (1083, 'paid', '11.93', '2026-01-13T11:36:35.000000+00:00');
INSERT INTO public.orders VALUES (1084, 'paid', '41.30', '2026-01-13T11:57:46.000000+00:00');
INSERT INTO public.orders VALUES (1085, 'paid', '10.43', '2026-01-16T16:22:48.000000+00:00');
INSERT INTO public.orders VALUES (1086, 'cancelled', '31.54', '2026-01-13T13:05:21.000000+00:00');
INSERT INTO public.orders VALUES (1087, 'paid', '15.36', '2026-01-13T14:46:33.000000+00:00');
INSERT INTO public.orders VALUES (1088, 'cancelled', '53.44', '2026-01-13T14:47:47.000000+00:00');
INSERT INTO public.orders VALUES (1089, 'cancelled', '38.34', '2026-01-13T15:16:57.000000+00:00');
INSERT INTO public.orders VALUES (1090, 'paid', '25.22', '2026-01-13T15:47:32.000000+00:00');
INSERT INTO public.orders VALUES (1091, 'paid', '22.40', '2026-01-13T16:12:21.000000+00:00');
INSERT INTO public.orders VALUES (1092, 'paid', '36.71', '2026-01-13T16:12:27.000000+00:00');
INSERT INTO public.orders VALUES (1093, 'paid', '34.44', '2026-01-15T08:19:07.000000+00:00');
INSERT INTO public.orders VALUES (1094, 'cancelled', '57.89', '2026-01-13T16:43:12.000000+00:00');
INSERT INTO public.orders VALUES (1095, 'refunded', '76.78', '2026-01-14T11:50:09.000000+00:00');
INSERT INTO public.orders VALUES (1096, 'paid', '21.82', '2026-01-13T17:32:25.000000+00:00');
INSERT INTO public.orders VALUES (1097, 'paid', '11.94', '2026-01-14T08:01:15.000000+00:00');
INSERT INTO public.orders VALUES (1098, 'paid', '16.42', '2026-01-14T08:23:49.000000+00:00');
INSERT INTO public.orders VALUES (1099, 'paid', '65.45', '2026-01-14T08:37:14.000000+00:00');
INSERT INTO public.orders VALUES (1100, 'paid', '37.53', '2026-01-14T11:02:46.000000+00:00');
INSERT INTO public.orders VALUES (1101, 'cancelled', '26.42', '2026-01-14T11:49:22.000000+00:00');
INSERT INTO public.orders VALUES (1102, 'paid', '22.88', '2026-01-14T11:55:53.000000+00:00');
INSERT INTO public.orders VALUES (1103, 'paid', '29.76', '2026-01-14T12:00:19.000000+00:00');
INSERT INTO public.orders VALUES (1104, 'paid', '15.72', '2026-01-15T15:30:52.000000+00:00');
INSERT INTO public.orders VALUES (1105, 'paid', '33.70', '2026-01-14T12:35:01.000000+00:00');
INSERT INTO public.orders VALUES (1106, 'paid', '33.99', '2026-01-14T13:28:03.000000+00:00');
INSERT INTO public.orders VALUES (1107, 'paid', '98.34', '2026-01-15T15:43:28.000000+00:00');
INSERT INTO public.orders VALUES (1108, 'paid', '14.74', '2026-01-14T14:33:22.000000+00:00');
INSERT INTO public.orders VALUES (1109, 'paid', '40.26', '2026-01-14T15:23:41.000000+00:00');
INSERT INTO public.orders VALUES (1110, 'paid', '34.46', '2026-01-14T16:19:31.000000+00:00');
INSERT INTO public.orders VALUES (1111, 'paid', '19.88', '2026-01-14T16:31:20.000000+00:00');
INSERT INTO public.orders VALUES (1112, 'cancelled', '33.97', '2026-01-14T16:39:09.000000+00:00');
INSERT INTO public.orders VALUES (1113, 'paid', '13.74', '2026-01-14T16:55:01.000000+00:00');
INSERT INTO public.orders VALUES (1114, 'paid', '22.59', '2026-01-14T17:58:19.000000+00:00');
INSERT INTO public.orders VALUES (1115, 'paid', '103.32', '2026-01-15T08:07:22.000000+00:00');
INSERT INTO public.orders VALUES (1116, 'paid', '41.70', '2026-01-15T08:56:37.000000+00:00');
INSERT INTO public.orders VALUES (1117, 'paid', '27.84', '2026-01-15T09:01:37.000000+00:00');
INSERT INTO public.orders VALUES (1118, 'paid', '11.89', '2026-01-15T09:07:43.000000+00:00');
INSERT INTO public.orders VALUES (1119, 'paid', '13.26', '2026-01-15T09:35:51.000000+00:00');
INSERT INTO public.orders VALUES (1120, 'paid', '16.01', '2026-01-15T11:30:50.000000+00:00');
INSERT INTO public.orders VALUES (1121, 'paid', '10.90', '2026-01-16T12:49:28.000000+00:00');
INSERT INTO public.orders VALUES (1122, 'paid', '18.77', '2026-01-15T11:46:32.000000+00:00');
INSERT INTO public.orders VALUES (1123, 'cancelled', '126.64', '2026-01-14T12:30:53.000000+00:00');
INSERT INTO public.orders VALUES (1124, 'paid', '15.13', '2026-01-15T12:57:26.000000+00:00');
INSERT INTO public.orders VALUES (1125, 'refunded', '62.06', '2026-01-18T16:30:45.000000+00:00');
INSERT INTO public.orders VALUES (1126, 'paid', '29.94', '2026-01-16T14:23:53.000000+00:00');
INSERT INTO public.orders VALUES (1127, 'paid', '95.62', '2026-01-15T17:01:30.000000+00:00');
INSERT INTO public.orders VALUES (1128, 'cancelled', '62.69', '2026-01-16T08:34:22.000000+00:00');
INSERT INTO public.orders VALUES (1129, 'paid', '20.50', '2026-01-16T08:56:05.000000+00:00');
INSERT INTO public.orders VALUES (1130, 'paid', '32.65', '2026-01-18T09:10:42.000000+00:00');
INSERT INTO public.orders VALUES (1131, 'paid', '48.11', '2026-01-16T10:12:20.000000+00:00');
INSERT INTO public.orders VALUES (1132, 'paid', '23.80', '2026-01-16T11:25:37.000000+00:00');
INSERT INTO public.orders VALUES (1133, 'paid', '27.57', '2026-01-16T11:42:12.000000+00:00');
INSERT INTO public.orders VALUES (1134, 'paid', '37.98', '2026-01-15T12:12:43.000000+00:00');
INSERT INTO public.orders VALUES (1135, 'paid', '27.33', '2026-01-16T12:15:26.000000+00:00');
INSERT INTO public.orders VALUES (1136, 'refunded', '43.46', '2026-01-17T12:17:13.000000+00:00');
INSERT INTO public.orders VALUES (1137, 'cancelled', '74.45', '2026-01-16T12:43:55.000000+00:00');
INSERT INTO public.orders VALUES (1138, 'paid', '58.37', '2026-01-17T14:46:34.000000+00:00');
INSERT INTO public.orders VALUES (1139, 'paid', '37.71', '2026-01-16T13:31:18.000000+00:00');
INSERT INTO public.orders VALUES (1140, 'refunded', '20.19', '2026-01-17T12:38:26.000000+00:00');
INSERT INTO public.orders VALUES (1141, 'paid', '40.85', '2026-01-16T14:37:20.000000+00:00');
INSERT INTO public.orders VALUES (1142, 'paid', '39.07', '2026-01-16T15:11:46.000000+00:00');
INSERT INTO public.orders VALUES (1143, 'paid', '44.99', '2026-01-16T15:14:28.000000+00:00');
INSERT INTO public.orders VALUES (1144, 'paid', '65.57', '2026-01-16T15:54:13.000000+00:00');
INSERT INTO public.orders VALUES (1145, 'paid', '46.79', '2026-01-16T16:23:27.000000+00:00');
INSERT INTO public.orders VALUES (1146, 'paid', '53.42', '2026-01-16T16:38:34.000000+00:00');
INSERT INTO public.orders VALUES (1147, 'cancelled', '15.10', '2026-01-16T16:59:00.000000+00:00');
INSERT INTO public.orders VALUES (1148, 'refunded', '24.57', '2026-01-18T16:08:12.000000+00:00');
INSERT INTO public.orders VALUES (1149, 'paid', '30.00', '2026-01-17T08:25:31.000000+00:00');
INSERT INTO public.orders VALUES (1150, 'paid', '41.32', '2026-01-17T08:41:38.000000+00:00');
INSERT INTO public.orders VALUES (1151, 'paid', '26.55', '2026-01-18T09:58:49.000000+00:00');
INSERT INTO public.orders VALUES (1152, 'paid', '12.42', '2026-01-14T10:43:15.000000+00:00');
INSERT INTO public.orders VALUES (1153, 'paid', '87.61', '2026-01-17T10:55:03.000000+00:00');
INSERT INTO public.orders VALUES (1154, 'refunded', '48.45', '2026-01-19T17:25:40.000000+00:00');
INSERT INTO public.orders VALUES (1155, 'cancelled', '9.12', '2026-01-17T11:35:32.000000+00:00');
INSERT INTO public.orders VALUES (1156, 'paid', '39.94', '2026-01-19T14:41:21.000000+00:00');
INSERT INTO public.orders VALUES (1157, 'paid', '9.59', '2026-01-17T13:43:32.000000+00:00');
INSERT INTO public.orders VALUES (1158, 'cancelled', '30.50', '2026-01-17T14:38:22.000000+00:00');
INSERT INTO public.orders VALUES (1159, 'paid', '10.44', '2026-01-17T15:13:19.000000+00:00');
INSERT INTO public.orders VALUES (1160, 'paid', '60.27', '2026-01-18T08:44:31.000000+00:00');
INSERT INTO public.orders VALUES (1161, 'paid', '19.60', '2026-01-17T08:52:11.000000+00:00');
INSERT INTO public.orders VALUES (1162, 'paid', '26.38', '2026-01-18T09:59:41.000000+00:00');
INSERT INTO public.orders VALUES (1163, 'paid', '48.16', '2026-01-16T11:04:18.000000+00:00');
INSERT INTO public.orders VALUES (1164, 'paid', '20.75', '2026-01-18T11:13:03.000000+00:00');
INSERT INTO public.orders VALUES (1165, 'paid', '16.07', '2026-01-18T12:01:31.000000+00:00');
INSERT INTO public.orders VALUES (1166, 'paid', '26.37', '2026-01-19T13:03:51.000000+00:00');
INSERT INTO public.orders VALUES (1167, 'pending', '68.91', '2026-01-18T13:00:21.000000+00:00');
INSERT INTO public.orders VALUES (1168, 'pending', '82.62', '2026-01-18T13:41:29.000000+00:00');
INSERT INTO public.orders VALUES (1169, 'paid', '36.24', '2026-01-18T14:42:59.000000+00:00');
INSERT INTO public.orders VALUES (1170, 'paid', '29.58', '2026-01-18T15:17:16.000000+00:00');
INSERT INTO public.orders VALUES (1171, 'paid', '36.63', '2026-01-18T16:14:50.000000+00:00');
INSERT INTO public.orders VALUES (1172, 'paid', '103.15', '2026-01-17T17:10:25.000000+00:00');
INSERT INTO public.orders VALUES (1173, 'paid', '39.90', '2026-01-18T17:45:07.000000+00:00');
INSERT INTO public.orders VALUES (1174, 'paid', '30.46', '2026-01-19T08:52:57.000000+00:00');
INSERT INTO public.orders VALUES (1175, 'pending', '44.86', '2026-01-19T09:03:45.000000+00:00');
INSERT INTO public.orders VALUES (1176, 'paid', '23.17', '2026-01-19T09:33:18.000000+00:00');
INSERT INTO public.orders VALUES (1177, 'cancelled', '47.21', '2026-01-19T10:27:10.000000+00:00');
INSERT INTO public.orders VALUES (1178, 'cancelled', '27.90', '2026-01-19T12:54:39.000000+00:00');
INSERT INTO public.orders VALUES (1179, 'paid', '35.91', '2026-01-19T13:28:56.000000+00:00');
INSERT INTO public.orders VALUES (1180, 'paid', '19.05', '2026-01-19T13:57:01.000000+00:00');
INSERT INTO public.orders VALUES (1181, 'paid', '40.33', '2026-01-19T14:22:39.000000+00:00');
INSERT INTO public.orders VALUES (1182, 'paid', '20.95', '2026-01-19T14:27:42.000000+00:00');
INSERT INTO public.orders VALUES (1183, 'paid', '47.30', '2026-01-19T15:33:33.000000+00:00');
INSERT INTO public.orders VALUES (1184, 'paid', '63.77', '2026-01-19T15:56:17.000000+00:00');
INSERT INTO public.orders VALUES (1185, 'pending', '16.05', '2026-01-19T16:28:11.000000+00:00');
INSERT INTO public.orders VALUES (1186, 'paid', '11.75', '2026-01-19T16:58:19.000000+00:00');
INSERT INTO public.orders VALUES (105, 'paid', '41.00', '2026-01-19T08:00:00.000000+00:00');


--
-- Data for Name: pipeline_batches; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.pipeline_batches VALUES (1, 'orders-fdbc48bc3f493e896c66afc7', 'incremental', NULL, NULL, 192, 192, 0, 0, NULL, '2026-01-19T17:25:40.000000+00:00', '2026-01-20T12:00:00.000000+00:00', '["2025-12-27", "2026-01-01", "2026-01-05", "2026-01-08", "2026-01-09", "2026-01-10", "2026-01-11", "2026-01-12", "2026-01-13", "2026-01-14", "2026-01-15", "2026-01-16", "2026-01-17", "2026-01-18", "2026-01-19"]', NULL, NULL, NULL);
INSERT INTO public.pipeline_batches VALUES (2, 'orders-6a5cc2c334082014b4f36003', 'incremental', '2026-01-17T17:25:40.000000+00:00', NULL, 31, 0, 1, 30, '2026-01-19T17:25:40.000000+00:00', '2026-01-19T17:25:40.000000+00:00', '2026-01-20T12:00:00.000000+00:00', '["2026-01-19"]', NULL, NULL, NULL);
INSERT INTO public.pipeline_batches VALUES (3, 'orders-671ac2fbd15b5386375fe583', 'range', '2026-01-10T00:00:00.000000+00:00', '2026-01-20T00:00:00.000000+00:00', 155, 0, 0, 155, '2026-01-19T17:25:40.000000+00:00', '2026-01-19T17:25:40.000000+00:00', '2026-01-20T12:00:00.000000+00:00', '[]', 0, NULL, false);
INSERT INTO public.pipeline_batches VALUES (4, 'orders-abdb7422f3b593f5afbf8056', 'incremental', '2026-01-17T16:25:40.000000+00:00', NULL, 32, 0, 0, 32, '2026-01-19T16:25:40.000000+00:00', '2026-01-19T17:25:40.000000+00:00', '2026-01-20T12:00:00.000000+00:00', '[]', NULL, NULL, NULL);


--
-- Data for Name: pipeline_watermark; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.pipeline_watermark VALUES ('orders', '2026-01-19T17:25:40.000000+00:00', 'incremental');


--
-- Data for Name: pipeline_watermark_history; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.pipeline_watermark_history VALUES (1, '2026-01-20T12:00:00.000000+00:00', 'load', NULL, '2026-01-19T17:25:40.000000+00:00', NULL, 'orders-fdbc48bc3f493e896c66afc7');
INSERT INTO public.pipeline_watermark_history VALUES (2, '2026-01-20T12:00:00.000000+00:00', 'rewind', '2026-01-19T17:25:40.000000+00:00', '2026-01-19T16:25:40.000000+00:00', 'replay', NULL);
INSERT INTO public.pipeline_watermark_history VALUES (3, '2026-01-20T12:00:00.000000+00:00', 'load', '2026-01-19T16:25:40.000000+00:00', '2026-01-19T17:25:40.000000+00:00', NULL, 'orders-abdb7422f3b593f5afbf8056');


--
-- Name: pipeline_batches_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.pipeline_batches_id_seq', 4, true);


--
-- Name: pipeline_watermark_history_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.pipeline_watermark_history_id_seq', 3, true);


--
-- Name: daily_revenue daily_revenue_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.daily_revenue
    ADD CONSTRAINT daily_revenue_pkey PRIMARY KEY (day);


--
-- Name: orders orders_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_pkey PRIMARY KEY (order_id);


--
-- Name: pipeline_batches pipeline_batches_batch_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pipeline_batches
    ADD CONSTRAINT pipeline_batches_batch_id_key UNIQUE (batch_id);


--
-- Name: pipeline_batches pipeline_batches_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pipeline_batches
    ADD CONSTRAINT pipeline_batches_pkey PRIMARY KEY (id);


--
-- Name: pipeline_watermark_history pipeline_watermark_history_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pipeline_watermark_history
    ADD CONSTRAINT pipeline_watermark_history_pkey PRIMARY KEY (id);


--
-- Name: pipeline_watermark pipeline_watermark_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pipeline_watermark
    ADD CONSTRAINT pipeline_watermark_pkey PRIMARY KEY (name);


--
-- Name: orders_updated_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX orders_updated_at_idx ON public.orders USING btree (updated_at);


--
-- PostgreSQL database dump complete
--


